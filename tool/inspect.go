package tool

// Inspect: a dump of one segment file, like Kafka's dump-log tool. It
// prints every frame header the walker of walk.go meets, with the problems
// it finds (a damaged or misplaced frame and the gap after it, a torn
// tail, a payload that does not decode), and with Records every record.
// It opens the file read-only and writes nothing.

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// commitTimeLayout is RFC 3339 with milliseconds.
const commitTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// InspectOptions says which segment file Inspect dumps, how, and where
// what is not the dump goes.
type InspectOptions struct {
	// Segment is the path of the segment file. Its name
	// (00000000000000000000.log) gives the offset its first frame must
	// start at; under any other name that is not checked.
	Segment string
	// Records prints every record too, under its frame.
	Records bool
	// JSON writes one JSON object per frame (JSON lines) instead of text.
	JSON bool
	// MaxBytes is how many bytes of a key or a value are shown; 0 shows
	// them whole. The command's default is 200.
	MaxBytes int
	// Messages receives the lines that are not the dump: the warning that
	// a running process holds the data directory the segment lies in, and
	// in JSON the notice that the file's name is not a segment's. nil
	// discards them.
	Messages io.Writer
	// FS is the file system read; nil is the real one (vfs.OS).
	FS vfs.FS
}

// Inspect writes to w every frame header of one segment file, with the
// problems found (a damaged or misplaced frame and the gap after it, a
// torn tail, a payload that does not decode) and, with Records, every
// record; in text, a summary last. It returns how many problems it found.
// An error means the file could not be read through (what was dumped
// before stays written) or the dump could not be written.
func Inspect(w io.Writer, opts InspectOptions) (problems int, err error) {
	if opts.MaxBytes < 0 {
		return 0, fmt.Errorf("max bytes %d is negative", opts.MaxBytes)
	}
	files, messages := filesAndMessages(opts.FS, opts.Messages)
	if dataDir, ok := dataDirOfSegment(opts.Segment); ok {
		warnInUse(files, messages, "inspect", dataDir)
	}
	in := inspector{files: files, records: opts.Records, json: opts.JSON, maxBytes: opts.MaxBytes}
	out := bufio.NewWriter(w)
	problems, err = in.run(opts.Segment, out, messages)
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("write: %w", ferr)
	}
	return problems, err
}

// dataDirOfSegment is the data directory a segment path lies in
// (DATA/topics/TOPIC/pNNNNN/SEGMENT.log), if it lies in one.
func dataDirOfSegment(segment string) (string, bool) {
	partitionDir := filepath.Dir(filepath.Clean(segment))
	topicsDir := filepath.Dir(filepath.Dir(partitionDir))
	if _, err := wire.ParsePartitionDirName(filepath.Base(partitionDir)); err != nil || filepath.Base(topicsDir) != wire.TopicsDirName {
		return "", false
	}
	return filepath.Dir(topicsDir), true
}

// dictionariesOfSegment is the directory whose dictionary files decode a
// segment: its topic directory (DATA/topics/TOPIC/pNNNNN/SEGMENT.log), or
// the place a set-aside copy lies in with its topic's dictionaries
// (DATA/lost/TOPIC.INCARNATION/pNNNNN.MS/SEGMENT.log), if it lies in
// either.
func dictionariesOfSegment(segment string) (string, bool) {
	partitionDir := filepath.Dir(filepath.Clean(segment))
	if _, ok := dataDirOfSegment(segment); ok {
		return filepath.Dir(partitionDir), true
	}
	name, _, _ := strings.Cut(filepath.Base(partitionDir), ".")
	if _, err := wire.ParsePartitionDirName(name); err != nil || filepath.Base(filepath.Dir(filepath.Dir(partitionDir))) != wire.LostDirName {
		return "", false
	}
	return filepath.Dir(partitionDir), true
}

// inspector dumps one file.
type inspector struct {
	files    vfs.FS
	records  bool // print records
	json     bool // JSON lines instead of text
	maxBytes int  // bytes of a key or value shown; 0 for all

	walker *walker
}

// inspectFrame is one JSON line: a frame, or the damage found at a
// position.
type inspectFrame struct {
	Position int64 `json:"position"`
	// Status: "ok"; "undecodable" (the CRC passes, the payload does not
	// decode); "misplaced" (valid, wrong base offset; valid frames resume
	// later); "damaged" (valid frames resume later); "torn_tail" (nothing
	// valid follows).
	Status string         `json:"status"`
	Header *inspectHeader `json:"header"` // null when the header does not parse
	CRCOK  bool           `json:"crc_ok"`
	// Problem says what is wrong; Expected is the offset the sequence
	// expected at Position (absent while the file's sequence is unknown);
	// Gap holds the offsets lost to it, From null while the sequence is
	// unknown; ResumeAt is where valid frames resume; TornBytes the bytes
	// from Position to the end.
	Problem   string          `json:"problem,omitempty"`
	Expected  *int64          `json:"expected_offset,omitempty"`
	Gap       *inspectGap     `json:"gap,omitempty"`
	ResumeAt  *int64          `json:"resume_at,omitempty"`
	TornBytes *int64          `json:"torn_bytes,omitempty"`
	Records   []inspectRecord `json:"records,omitempty"`
}

type inspectHeader struct {
	BaseOffset        int64  `json:"base_offset"`
	LastOffset        int64  `json:"last_offset"`
	RecordCount       int32  `json:"record_count"`
	Codec             string `json:"codec"`
	UncompressedBytes uint32 `json:"uncompressed_bytes"`
	StoredBytes       uint32 `json:"stored_bytes"`
	FrameBytes        int64  `json:"frame_bytes"`
	CRC               string `json:"crc"` // as the header stores it
}

// inspectGap is the half-open offset range [From, To).
type inspectGap struct {
	From *int64 `json:"from"`
	To   int64  `json:"to"`
}

type inspectRecord struct {
	Offset            int64      `json:"offset"`
	CommittedAt       string     `json:"committed_at"`
	CommittedAtUnixMs int64      `json:"committed_at_unix_ms"`
	Key               *shownBlob `json:"key"` // null: the record has no key
	Value             shownBlob  `json:"value"`
}

// shownBlob is a key or a value as shown: printable UTF-8 as text, anything
// else as base64, cut after maxBytes.
type shownBlob struct {
	Encoding  string `json:"encoding"` // "text" or "base64"
	Data      string `json:"data"`
	Size      int    `json:"size"`                // the whole key or value, in bytes
	Truncated int    `json:"truncated,omitempty"` // bytes left out
}

// run dumps path to out and returns the number of problems found. An error
// means the file could not be read.
func (in *inspector) run(path string, out io.Writer, messages io.Writer) (problems int, err error) {
	base, nameErr := wire.ParseSegmentFileName(filepath.Base(path))
	if nameErr != nil {
		base = -1
	}
	f, err := in.files.OpenFile(path, os.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.IsDir() {
		return 0, fmt.Errorf("%s is a directory, not a segment file", path)
	}
	notice := ""
	if nameErr != nil {
		notice = fmt.Sprintf("%s is not a segment file name (20 digits and .log): the first frame's base offset is not checked against it", filepath.Base(path))
	}
	if in.json {
		if notice != "" {
			fmt.Fprintf(messages, "inspect: %s\n", notice)
		}
	} else {
		fmt.Fprintf(out, "file: %s, %d bytes", path, fi.Size)
		if notice != "" {
			fmt.Fprintf(out, ": %s\n", notice)
		} else {
			fmt.Fprintf(out, ", first base offset %d (from its name)\n", base)
		}
	}

	in.walker = newWalker()
	if dictsDir, ok := dictionariesOfSegment(path); ok {
		// A segment of a data directory's topic, or of a copy set aside
		// under lost/: the dictionaries beside its partition decode its
		// zstd-dict frames.
		for _, detail := range in.walker.useDictionaries(in.files, dictsDir) {
			problems++
			fmt.Fprintf(messages, "inspect: %s\n", detail)
		}
	}
	var frames, records int64
	var writeErr error
	emit := func(fr inspectFrame) {
		if writeErr != nil {
			return
		}
		if in.json {
			b, err := json.Marshal(fr)
			if err == nil {
				b = append(b, '\n')
				_, err = out.Write(b)
			}
			writeErr = err
			return
		}
		writeErr = in.writeText(out, fr)
	}
	onFrame := func(pos int64, h wire.FrameHeader, frame []byte) {
		frames++
		fr := inspectFrame{Position: pos, Status: "ok", Header: headerOf(h), CRCOK: true}
		onRecord := func(offset int64, env wire.Envelope) {
			if in.records {
				fr.Records = append(fr.Records, in.record(offset, env))
			}
		}
		if err := in.walker.decodedRecords(h, frame, onRecord); err != nil {
			problems++
			fr.Status, fr.Records = "undecodable", nil
			fr.Problem = "the CRC passes but the payload does not decode: " + err.Error()
		} else {
			records += int64(h.RecordCount)
		}
		emit(fr)
	}
	onDamage := func(d damage) {
		problems++
		fr := inspectFrame{Position: d.pos, CRCOK: d.misplaced(), Problem: d.reason}
		if d.headerParsed {
			fr.Header = headerOf(d.header)
		}
		var from *int64
		if d.expect >= 0 {
			from = ptr(d.expect)
		}
		switch {
		case d.tornTail():
			fr.Status = "torn_tail"
			fr.TornBytes = ptr(fi.Size - d.pos)
		case d.misplaced():
			fr.Status = "misplaced"
		default:
			fr.Status = "damaged"
		}
		fr.Expected = from
		if !d.tornTail() {
			fr.Gap = &inspectGap{From: from, To: d.resumeBase}
			fr.ResumeAt = ptr(d.resumeAt)
		}
		emit(fr)
	}
	res, err := in.walker.walk(f, fi.Size, base, onFrame, onDamage)
	if err != nil {
		return problems, err
	}
	if writeErr != nil {
		return problems, fmt.Errorf("write: %w", writeErr)
	}
	if !in.json {
		offsets := "no records"
		if res.firstBase >= 0 {
			offsets = fmt.Sprintf("offsets %d..%d", res.firstBase, res.tail-1)
		}
		unwritten := ""
		if res.unwrittenAt >= 0 {
			unwritten = fmt.Sprintf(", %d bytes of zeros written ahead from position %d (not damage)", fi.Size-res.unwrittenAt, res.unwrittenAt)
		}
		fmt.Fprintf(out, "summary: %d frames, %d records, %s, %d problems%s\n", frames, records, offsets, problems, unwritten)
	}
	return problems, nil
}

func headerOf(h wire.FrameHeader) *inspectHeader {
	return &inspectHeader{
		BaseOffset:        h.BaseOffset,
		LastOffset:        h.EndOffset() - 1,
		RecordCount:       h.RecordCount,
		Codec:             codec.ID(h.Codec).String(),
		UncompressedBytes: h.UncompressedSize,
		StoredBytes:       h.StoredSize,
		FrameBytes:        h.FrameLen(),
		CRC:               fmt.Sprintf("0x%08x", h.CRC),
	}
}

// record renders one record's envelope. It copies what it keeps: the
// envelope points into a buffer the next frame reuses.
func (in *inspector) record(offset int64, env wire.Envelope) inspectRecord {
	r := inspectRecord{
		Offset:            offset,
		CommittedAt:       time.UnixMilli(env.CommittedAtUnixMs).UTC().Format(commitTimeLayout),
		CommittedAtUnixMs: env.CommittedAtUnixMs,
		Value:             showBlob(env.Payload, in.maxBytes),
	}
	if len(env.Key) > 0 {
		r.Key = ptr(showBlob(env.Key, in.maxBytes))
	}
	return r
}

// showBlob renders b: as text when what is shown is printable UTF-8, else
// as base64; at most maxBytes of it (0: all), the rest counted.
func showBlob(b []byte, maxBytes int) shownBlob {
	shown := b
	if maxBytes > 0 && len(shown) > maxBytes {
		shown = shown[:maxBytes]
		// Do not cut text in the middle of a character.
		for i := 0; i < utf8.UTFMax-1 && len(shown) > 0 && !utf8.Valid(shown); i++ {
			shown = shown[:len(shown)-1]
		}
	}
	if printable(shown) {
		return shownBlob{Encoding: "text", Data: string(shown), Size: len(b), Truncated: len(b) - len(shown)}
	}
	if maxBytes > 0 && len(b) > maxBytes {
		shown = b[:maxBytes]
	}
	return shownBlob{Encoding: "base64", Data: base64.StdEncoding.EncodeToString(shown), Size: len(b), Truncated: len(b) - len(shown)}
}

// printable reports whether b is valid UTF-8 made of printable characters
// and ordinary white space.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

// text renders a shown key or value: quoted text, or "base64:" and the
// encoding, with a "(+N bytes)" note when cut.
func (s shownBlob) text() string {
	t := strconv.Quote(s.Data)
	if s.Encoding == "base64" {
		t = "base64:" + s.Data
	}
	if s.Truncated > 0 {
		t += fmt.Sprintf(" (+%d bytes)", s.Truncated)
	}
	return t
}

// writeText writes a frame the way Kafka's dump-log tool does: key: value
// pairs on one line, records on lines starting with "| ", and problems on
// indented lines.
func (in *inspector) writeText(w io.Writer, fr inspectFrame) error {
	crc := "BAD"
	if fr.CRCOK {
		crc = "ok"
	}
	var err error
	if h := fr.Header; h != nil {
		_, err = fmt.Fprintf(w, "position: %d baseOffset: %d lastOffset: %d count: %d codec: %s uncompressed: %d stored: %d size: %d crc: %s %s\n",
			fr.Position, h.BaseOffset, h.LastOffset, h.RecordCount, h.Codec, h.UncompressedBytes, h.StoredBytes, h.FrameBytes, h.CRC, crc)
	} else {
		_, err = fmt.Fprintf(w, "position: %d header: unreadable crc: %s\n", fr.Position, crc)
	}
	if err != nil {
		return err
	}
	for _, r := range fr.Records {
		key := "none"
		keySize := 0
		if r.Key != nil {
			key, keySize = r.Key.text(), r.Key.Size
		}
		if _, err := fmt.Fprintf(w, "| offset: %d committedAt: %s keySize: %d valueSize: %d key: %s value: %s\n",
			r.Offset, r.CommittedAt, keySize, r.Value.Size, key, r.Value.text()); err != nil {
			return err
		}
	}
	if fr.Problem == "" {
		return nil
	}
	var what string
	switch fr.Status {
	case "undecodable":
		what = "undecodable payload"
	case "torn_tail":
		what = fmt.Sprintf("torn tail: %d bytes from position %d to the end of the file", *fr.TornBytes, fr.Position)
		if fr.Expected != nil {
			what += fmt.Sprintf(", where offset %d was expected", *fr.Expected)
		}
	default:
		what = "damaged frame"
		if fr.Status == "misplaced" {
			what = "misplaced frame"
		}
		if fr.Gap.From != nil {
			what += fmt.Sprintf(": offsets %s lost", offsetRange(*fr.Gap.From, fr.Gap.To))
		} else {
			what += fmt.Sprintf(": offsets before %d lost", fr.Gap.To)
		}
		what += fmt.Sprintf(", frames resume at position %d", *fr.ResumeAt)
	}
	_, err = fmt.Fprintf(w, "  problem: %s: %s\n", what, fr.Problem)
	return err
}
