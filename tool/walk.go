package tool

// The segment walker that verify and inspect share. The walk itself is the
// engine's (partition.WalkSegment, the walk recovery makes), so what these
// commands call a gap or a torn tail is exactly what an open of the log
// would call one; this file adds the decoding of each frame's records and
// the shapes verify and inspect report.

import (
	"fmt"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// damage is one place where a segment's frames leave their sequence.
type damage struct {
	pos          int64            // byte where the damaged or misplaced frame starts
	header       wire.FrameHeader // its header, when headerParsed (CRC unchecked)
	headerParsed bool
	isMisplaced  bool
	reason       string // what is wrong with the bytes at pos
	// expect is the offset the sequence expected at pos; -1 when unknown (a
	// file whose name carries no base offset, before its first valid frame).
	expect int64
	// resumeAt is where frames resume in sequence, at a frame whose base
	// offset is resumeBase: the offsets [expect, resumeBase) are a gap. -1
	// when no valid frame follows: a torn tail from pos to the end of the
	// file.
	resumeAt   int64
	resumeBase int64
}

// tornTail reports whether nothing valid follows the damage.
func (d damage) tornTail() bool { return d.resumeAt < 0 }

// misplaced reports whether the frame at pos checks out but carries another
// base offset than the sequence expects.
func (d damage) misplaced() bool { return d.isMisplaced }

// walkResult is what one walk of a segment found.
type walkResult struct {
	frames    int64 // frames accepted in sequence
	firstBase int64 // base offset of the first accepted frame; -1 when none
	tail      int64 // offset after the last accepted frame; the expected base when none (-1 if unknown)
	tailPos   int64 // byte after the last accepted frame
	tornAt    int64 // where a torn tail starts; -1 when none
	// unwrittenAt is where zeros the log wrote ahead of its frames start,
	// running to the end of the file: not damage; -1 when none.
	unwrittenAt int64
}

// walker walks segment files one after another, reusing its decode buffer.
type walker struct {
	decodeBuf []byte // the largest decoded payload so far, reused
	// dicts are the dictionaries of the topic whose segments are walked
	// (useDictionaries), read from dictsDir; nil: none, so a frame of codec
	// zstd-dict does not decode (codec.ErrDictionaryMissing).
	dicts         *codec.DictionarySet
	dictsDir      string
	dictsProblems []string // what could not be read of dictsDir's files
}

// useDictionaries makes the walker decode with the dictionary files of
// topicDir (partition.ReadDictionaryFiles), read once per directory; it
// returns what could not be read (each file left out, and a failure to
// read them), at every call for the directory: each partition of a topic
// walked with them has them in its report.
func (w *walker) useDictionaries(files vfs.FS, topicDir string) []string {
	if w.dicts != nil && w.dictsDir == topicDir {
		return w.dictsProblems
	}
	set, _, bad, err := partition.ReadDictionaryFiles(files, topicDir)
	var problems []string
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, b := range bad {
		problems = append(problems, "dictionary file "+b.Error()+": frames that name it do not decode")
	}
	w.dicts, w.dictsDir, w.dictsProblems = set, topicDir, problems
	return problems
}

func newWalker() *walker { return &walker{} }

// walk reads the frames of file, whose size is size, in order, with the
// engine's rules (partition.WalkSegment). base is the offset the first
// frame must start at, or -1 when the file's name carries none. It calls
// onFrame for every frame accepted in sequence (frame holds its bytes,
// valid until onFrame returns) and onDamage for every departure from the
// sequence, in file order. Only an I/O error fails the walk.
func (w *walker) walk(file vfs.File, size, base int64, onFrame func(pos int64, h wire.FrameHeader, frame []byte), onDamage func(damage)) (walkResult, error) {
	res, err := partition.WalkSegment(file, size, base, onFrame, func(d partition.SegmentDamage) {
		reason := ""
		if d.Reason != nil {
			reason = d.Reason.Error()
		}
		onDamage(damage{pos: d.Pos, header: d.Header, headerParsed: d.HeaderParsed, isMisplaced: d.Misplaced,
			reason: reason, expect: d.Expect, resumeAt: d.ResumeAt, resumeBase: d.ResumeBase})
	})
	return walkResult{frames: res.Frames, firstBase: res.FirstBase, tail: res.Tail, tailPos: res.TailPos, tornAt: res.TornAt, unwrittenAt: res.UnwrittenAt}, err
}

// decodedRecords decodes a valid frame's payload through its codec and
// calls onRecord for each record's envelope, in offset order. A frame whose
// CRC passes but whose payload does not decode is damage: the error says
// why. The decoded payload lives in a buffer reused by the next call.
func (w *walker) decodedRecords(h wire.FrameHeader, frame []byte, onRecord func(offset int64, env wire.Envelope)) error {
	c, err := codec.ForFrame(codec.ID(h.Codec), w.dicts)
	if err != nil {
		return err
	}
	// INVARIANT: h came from wire.CheckFrame, so UncompressedSize <=
	// wire.MaxFrameBytes bounds the decode buffer.
	payload, err := c.Decode(w.decodeBuf, h.Stored(frame), int(h.UncompressedSize))
	if err != nil {
		return err
	}
	if cap(payload) > cap(w.decodeBuf) {
		w.decodeBuf = payload[:cap(payload)]
	}
	var rr wire.RecordReader
	if err := rr.Reset(payload, int(h.RecordCount)); err != nil {
		return err
	}
	// Parse every envelope before reporting any, so a frame with one bad
	// record yields no record at all, like the engine's decodeFrame.
	for offset := h.BaseOffset; ; offset++ {
		rec, ok := rr.Next()
		if !ok {
			break
		}
		if _, err := wire.ParseEnvelope(rec); err != nil {
			return fmt.Errorf("record at offset %d: %w", offset, err)
		}
	}
	if onRecord == nil {
		return nil
	}
	_ = rr.Reset(payload, int(h.RecordCount)) // checked above
	for offset := h.BaseOffset; ; offset++ {
		rec, ok := rr.Next()
		if !ok {
			return nil
		}
		env, _ := wire.ParseEnvelope(rec) // checked above
		onRecord(offset, env)
	}
}
