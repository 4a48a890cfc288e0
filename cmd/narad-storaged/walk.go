package main

// The segment walker that verify and inspect share. It makes the decisions
// the engine's recovery makes (partition/recover.go walkActive and
// partition/scan.go), so that what these commands call a gap or a torn tail
// is exactly what an open of the log would call one:
//
//   - a frame is accepted when it checks out (wire.CheckFrame: header and
//     CRC) and sits where the sequence expects it: the first frame of a
//     segment at the offset the segment's name carries, every next one at
//     the previous frame's end;
//   - anything else is damage: the walk resyncs to the next valid frame
//     that claims offsets past the expected one, and the offsets in
//     between are a gap;
//   - damage with no valid frame after it is a torn tail;
//   - a resync never accepts a frame found inside a damaged frame whose
//     header is plausible (it parsed and claims the expected base offset)
//     and whose extent lies within the file: the search starts past that
//     extent, since a frame-shaped run of bytes inside a payload is record
//     bytes. A plausible uncompressed frame that claims bytes past the end
//     of the file is a torn tail outright.
//
// Memory is bounded the way the engine's scanner bounds it: one reusable
// read buffer, and a frame larger than it gets a buffer of its own only
// after its header has been validated (so at most wire.MaxFrameBytes) and
// checked against the bytes left in the file.

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/internal/fsys"
	"github.com/narad-io/storage/wire"
)

// walkBufferSize is the size of the read buffer frames stream through.
const walkBufferSize = 1 << 20

// frameStatus is what the walker found at a byte position.
type frameStatus int

const (
	frameValid   frameStatus = iota // a whole frame that checks out
	frameTorn                       // the bytes end before the frame does
	frameCorrupt                    // bytes present, but not a valid frame
)

// damage is one place where a segment's frames leave their sequence.
type damage struct {
	pos          int64            // byte where the damaged or misplaced frame starts
	header       wire.FrameHeader // its header, when headerParsed (CRC unchecked)
	headerParsed bool
	status       frameStatus // frameTorn, frameCorrupt, or frameValid for a misplaced frame
	reason       string      // what is wrong with the bytes at pos
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
func (d damage) misplaced() bool { return d.status == frameValid }

// walkResult is what one walk of a segment found.
type walkResult struct {
	frames    int64 // frames accepted in sequence
	firstBase int64 // base offset of the first accepted frame; -1 when none
	tail      int64 // offset after the last accepted frame; the expected base when none (-1 if unknown)
	tailPos   int64 // byte after the last accepted frame
	tornAt    int64 // where a torn tail starts; -1 when none
}

// walker walks segment files one after another, reusing its buffers.
type walker struct {
	readBuf   []byte // walkBufferSize bytes, reused by every walk
	decodeBuf []byte // the largest decoded payload so far, reused
}

func newWalker() *walker { return &walker{readBuf: make([]byte, walkBufferSize)} }

// walk reads the frames of file, whose size is size, in order. base is the
// offset the first frame must start at, or -1 when the file's name carries
// none: the first valid frame then sets the sequence. It calls onFrame for
// every frame accepted in sequence (frame holds its bytes, valid until
// onFrame returns) and onDamage for every departure from the sequence, in
// file order. Only an I/O error fails the walk: it is never taken for
// damage.
func (w *walker) walk(file fsys.File, size, base int64, onFrame func(pos int64, h wire.FrameHeader, frame []byte), onDamage func(damage)) (walkResult, error) {
	r := frameReader{file: file, limit: size, buf: w.readBuf}
	expect := base
	res := walkResult{firstBase: -1, tail: expect, tornAt: -1}
	for pos := int64(0); pos < size; {
		h, frame, status, reason, err := r.frameAt(pos)
		if err != nil {
			return res, err
		}
		if status == frameValid && (expect < 0 || h.BaseOffset == expect) {
			if res.firstBase < 0 {
				res.firstBase = h.BaseOffset
			}
			onFrame(pos, h, frame)
			pos += h.FrameLen()
			expect = h.EndOffset()
			res.frames++
			res.tail, res.tailPos = expect, pos
			continue
		}
		d := damage{pos: pos, header: h, headerParsed: h.RecordCount >= 1, status: status,
			expect: expect, resumeAt: -1, resumeBase: -1}
		if reason != nil {
			d.reason = reason.Error()
		} else {
			d.reason = fmt.Sprintf("valid frame with base offset %d where offset %d was expected", h.BaseOffset, expect)
		}
		at, next, found, err := r.resync(pos, expect, h)
		if err != nil {
			return res, err
		}
		if found {
			d.resumeAt, d.resumeBase = at, next.BaseOffset
		}
		onDamage(d)
		if !found {
			res.tornAt = pos
			break
		}
		// INVARIANT: the frame at 'at' is valid and claims offsets past
		// expect, so the next pass accepts it and the walk moves forward.
		expect = next.BaseOffset
		pos = at
	}
	return res, nil
}

// decodedRecords decodes a valid frame's payload through its codec and
// calls onRecord for each record's envelope, in offset order. A frame whose
// CRC passes but whose payload does not decode is damage: the error says
// why. The decoded payload lives in a buffer reused by the next call.
func (w *walker) decodedRecords(h wire.FrameHeader, frame []byte, onRecord func(offset int64, env wire.Envelope)) error {
	c, err := codec.ByID(codec.ID(h.Codec))
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

// frameReader reads the bytes [0, limit) of one file through one buffer,
// refilled with large reads. A frame is never read past limit, so a
// corrupt length can make it allocate at most limit - pos bytes, and never
// more than wire.MaxFrameBytes.
//
// Invariants: buf[:n] holds the file's bytes [at, at+n); at+n <= limit.
type frameReader struct {
	file  fsys.File
	limit int64
	buf   []byte
	at    int64
	n     int
}

// window returns the file's bytes [pos, pos+want), or fewer when limit (or
// the file's real end) comes first; it reads only what the buffer lacks.
func (r *frameReader) window(pos int64, want int) ([]byte, error) {
	if left := r.limit - pos; int64(want) > left {
		want = int(max(left, 0))
	}
	if pos >= r.at && pos+int64(want) <= r.at+int64(r.n) {
		return r.buf[pos-r.at : pos-r.at+int64(want)], nil
	}
	if want > len(r.buf) {
		// A frame larger than the shared buffer: one of its own, bounded
		// by limit above and by the validated header.
		r.buf = make([]byte, want)
	}
	n := max(min(int64(len(r.buf)), r.limit-pos), 0)
	got, err := r.file.ReadAt(r.buf[:n], pos)
	if err != nil && !(errors.Is(err, io.EOF) && got >= want) {
		if errors.Is(err, io.EOF) {
			// The file is shorter than its size said: what is missing
			// reads as torn.
			r.at, r.n = pos, got
			return r.buf[:min(got, want)], nil
		}
		r.at, r.n = 0, 0
		return nil, fmt.Errorf("read %s at byte %d: %w", r.file.Name(), pos, err)
	}
	r.at, r.n = pos, got
	return r.buf[:want], nil
}

// frameAt checks the frame starting at pos. For a valid frame it returns
// its header and bytes (valid until the next call); otherwise the status
// says why, reason describes it, and the header is returned when it parsed
// (RecordCount >= 1), CRC unchecked. err is an I/O error only.
func (r *frameReader) frameAt(pos int64) (h wire.FrameHeader, frame []byte, status frameStatus, reason, err error) {
	head, err := r.window(pos, wire.FrameHeaderSize)
	if err != nil {
		return h, nil, frameCorrupt, nil, err
	}
	h, reason = wire.ParseFrameHeader(head)
	if reason != nil {
		if errors.Is(reason, wire.ErrTruncated) {
			return h, nil, frameTorn, reason, nil
		}
		return h, nil, frameCorrupt, reason, nil
	}
	if pos+h.FrameLen() > r.limit {
		return h, nil, frameTorn, fmt.Errorf("%w: frame at byte %d claims %d bytes, %d left in the file",
			wire.ErrTruncated, pos, h.FrameLen(), r.limit-pos), nil
	}
	frame, err = r.window(pos, int(h.FrameLen()))
	if err != nil {
		return h, nil, frameCorrupt, nil, err
	}
	if _, reason = wire.CheckFrame(frame); errors.Is(reason, wire.ErrTruncated) {
		return h, nil, frameTorn, reason, nil
	} else if reason != nil {
		return h, nil, frameCorrupt, reason, nil
	}
	return h, frame, frameValid, nil, nil
}

// resync looks for where valid frames resume after damage at pos, in a
// sequence whose next offset was expect (-1: unknown). The candidate must
// claim offsets past expect: the damaged frame held at least one record.
// When the damaged frame's header is plausible (it parsed and claims base
// expect, or any base while expect is unknown) and its extent lies within
// the file, the search starts past that extent; a plausible uncompressed
// frame claiming bytes past the end is a torn tail outright (its two size
// fields must agree, so a flip in either makes it implausible). Any other
// damage is searched from pos+1, byte by byte. The same rule as the
// engine's scanner.resync.
func (r *frameReader) resync(pos, expect int64, damaged wire.FrameHeader) (at int64, h wire.FrameHeader, found bool, err error) {
	at = pos + 1
	if damaged.RecordCount >= 1 && (expect < 0 || damaged.BaseOffset == expect) {
		switch {
		case pos+damaged.FrameLen() <= r.limit:
			at = pos + damaged.FrameLen()
		case damaged.Codec == wire.CodecNone:
			return 0, h, false, nil
		}
	}
	magic := []byte{wire.FrameMagic >> 8, wire.FrameMagic & 0xff}
	for at+wire.FrameHeaderSize <= r.limit {
		chunk, err := r.window(at, len(r.buf))
		if err != nil {
			return 0, h, false, err
		}
		i := bytes.Index(chunk, magic)
		if i < 0 {
			if len(chunk) < 2 {
				return 0, h, false, nil
			}
			at += int64(len(chunk) - 1) // the magic may straddle the chunk end
			continue
		}
		at += int64(i)
		h, _, status, _, err := r.frameAt(at)
		if err != nil {
			return 0, h, false, err
		}
		if status == frameValid && h.BaseOffset > expect {
			return at, h, true, nil
		}
		at++
	}
	return 0, h, false, nil
}
