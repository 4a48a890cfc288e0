package partition

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// scanBufferSize is the size of the buffers recovery and the commit
// read-back stream frames through.
const scanBufferSize = 1 << 20

// frameStatus is what the scanner found at a position.
type frameStatus int

const (
	frameValid   frameStatus = iota // a whole frame that checks out
	frameTorn                       // the bytes end before the frame does
	frameCorrupt                    // bytes present, but not a valid frame
)

// scanner reads the frames of one file between two byte positions through
// one buffer, refilled with large reads. A frame is never read past limit,
// so a corrupt length can make it allocate at most limit - pos bytes, and
// never more than wire.MaxFrameBytes (docs/design.md R6).
//
// Invariants: buf[:n] holds the file's bytes [at, at+n); at+n <= limit.
type scanner struct {
	file  vfs.File
	limit int64 // bytes of the file the scan may read
	buf   []byte
	at    int64
	n     int
	pool  *[]byte // the pooled buffer, returned by release
	// skipUnreadable, for a read of records, retries a failed wide window
	// at the size asked for, so a block that fails to read costs only the
	// frames on it (stepOver). Never recovery or the commit's read-back:
	// there an I/O error fails the walk or the commit.
	skipUnreadable bool
	// keep, for a read of records, makes every refill read into a new
	// buffer, so the frames a scan handed out stay valid while records
	// point into them; refills grow to readWindowMax.
	keep bool
	// lend, for a read that lends its records, makes refills reuse pooled
	// buffers (pool holds the current one's), growing to readWindowMax.
	lend bool
	// maxRead, when set, bounds a refill's read even when the buffer has
	// grown past it for a large frame: a lending read's next frame header
	// must not pull in a whole large frame unchecked (readChecked reads
	// and checks those in parts).
	maxRead int
	// sums and parts, when sumsAt is the position of the frame frameAt
	// last found valid, are that large frame's checksum states after each
	// of its parts and its index of parts (readChecked): what a
	// frameProof keeps.
	sums   []wire.FrameSum
	parts  partIndex
	sumsAt int64
	// inParts, when set (a lending read), says whether a large frame is to
	// be proven in parts (proveInParts) rather than read whole: frameAt
	// then returns it valid with no bytes, its proof in sums and parts.
	inParts func(h wire.FrameHeader) bool
}

// newLendingScanner starts a scan for a lending read at pos, with a
// pooled window of readWindow bytes or the bytes left, if fewer.
func newLendingScanner(file vfs.File, limit, pos int64) *scanner {
	buf, p := getBuf(int(min(readWindow, max(limit-pos, wire.FrameHeaderSize))))
	return &scanner{file: file, limit: limit, buf: buf, pool: p, lend: true, maxRead: readWindowMax, skipUnreadable: true}
}

// inPlace reports whether the frame at pos of length n, which the scan
// handed out, may stay where it is after the scan (a frame the cache
// keeps): it must fill at least half of the memory its buffer holds, so
// it pins at most twice what a copy would. It returns that memory, what
// the frame keeps in place.
func (s *scanner) inPlace(pos, n int64) (capacity int, ok bool) {
	if pos < s.at || pos+n > s.at+int64(s.n) || 2*n < int64(cap(s.buf)) {
		return 0, false
	}
	return cap(s.buf), true
}

// giveUpBuffer gives the scan's buffer up, returning its pool pointer
// (nil: not pooled) to the taker of a frame inPlace allowed.
func (s *scanner) giveUpBuffer() (pooled *[]byte) {
	pooled = s.pool
	s.pool, s.buf, s.at, s.n = nil, nil, 0, 0
	return pooled
}

// readWindowMax bounds the windows a keep scan grows to.
const readWindowMax = 1 << 20

// unreadableStep is the block stepOver steps over when it cannot read it:
// the smallest unit a device fails reads in.
const unreadableStep = 512

// stepOver finds where the frames resume after a frame at pos, holding
// offsets from expect on, that cannot be read (docs/durability.md row 9). A
// candidate is taken only when the valid frames from it chain, each at
// its predecessor's end, to the segment's end: endOffset at byte limit.
// A frame image inside a record's value (a value may hold anything) does
// not, so an unreadable header never turns value bytes into records. The
// first candidate tried is the end the frame's header claims, when it
// parsed and claims expect; otherwise every position past pos, stepping
// over blocks that fail to read. It returns the candidate's position and
// base offset.
func (s *scanner) stepOver(pos, expect int64, h wire.FrameHeader, endOffset int64) (at, base int64, ok bool) {
	if h.RecordCount >= 1 && h.BaseOffset == expect && pos+h.FrameLen() <= s.limit {
		if s.chainsToEnd(pos+h.FrameLen(), h.EndOffset(), endOffset) {
			return pos + h.FrameLen(), h.EndOffset(), true
		}
	}
	magic := []byte{wire.FrameMagic >> 8, wire.FrameMagic & 0xff}
	for at = pos + 1; at+wire.FrameHeaderSize <= s.limit; {
		chunk, err := s.window(at, min(unreadableStep, int(s.limit-at)))
		if err != nil {
			at = (at/unreadableStep + 1) * unreadableStep
			continue
		}
		i := bytes.Index(chunk, magic)
		if i < 0 {
			at += int64(max(len(chunk)-1, 1)) // the magic may straddle the chunk end
			continue
		}
		at += int64(i)
		if c, _, status, _ := s.frameAt(at); status == frameValid && c.BaseOffset > expect && s.chainsToEnd(at, c.BaseOffset, endOffset) {
			return at, c.BaseOffset, true
		}
		at++
	}
	return 0, 0, false
}

// chainsToEnd reports whether valid frames run from byte at, the first
// with base offset base, each at its predecessor's end, to the scan's
// limit, ending at offset end.
func (s *scanner) chainsToEnd(at, base, end int64) bool {
	for at < s.limit {
		h, _, status, _ := s.frameAt(at)
		if status != frameValid || h.BaseOffset != base {
			return false
		}
		at, base = at+h.FrameLen(), h.EndOffset()
	}
	return at == s.limit && base == end
}

// newScanner starts a scan of file up to limit that will read about span
// bytes, with a pooled buffer; a span much smaller than one gets a buffer
// of its own size instead, so opening a log with a small (or empty) active
// segment, or reading back one small frame, never allocates a pooled
// buffer the pool had dropped.
func newScanner(file vfs.File, limit, span int64) *scanner {
	if span < scanBufferSize/4 {
		return &scanner{file: file, limit: limit, buf: make([]byte, max(span, wire.FrameHeaderSize))}
	}
	buf, p := getBuf(scanBufferSize) // pooled process-wide, never pinned per partition
	return &scanner{file: file, limit: limit, buf: buf, pool: p}
}

// release returns the pooled buffer (a grown one a scan that does not lend
// allocated is dropped).
func (s *scanner) release() {
	putBuf(s.pool)
	s.pool, s.buf = nil, nil
}

// window returns the file's bytes [pos, pos+want), or fewer when limit
// comes first; it reads from the file only what the buffer lacks.
func (s *scanner) window(pos int64, want int) ([]byte, error) {
	if left := s.limit - pos; int64(want) > left {
		want = int(max(left, 0))
	}
	if pos >= s.at && pos+int64(want) <= s.at+int64(s.n) {
		return s.buf[pos-s.at : pos-s.at+int64(want)], nil
	}
	s.prepare(want)
	n := min(int64(len(s.buf)), s.limit-pos)
	if s.maxRead > 0 {
		n = min(n, int64(max(want, s.maxRead)))
	}
	got, err := s.file.ReadAt(s.buf[:n], pos)
	if err != nil && !errors.Is(err, io.EOF) && n > int64(want) && s.skipUnreadable {
		// A read's wide window failed: the failing block may lie outside
		// the bytes asked for, so read exactly those before giving up.
		// One bad block then costs only the frames on it (docs/durability.md
		// row 9).
		got, err = s.file.ReadAt(s.buf[:want], pos)
	}
	if err != nil && !(errors.Is(err, io.EOF) && int64(got) >= int64(want)) {
		if errors.Is(err, io.EOF) {
			// The file is shorter than the caller believed: what is
			// missing reads as torn.
			s.at, s.n = pos, got
			return s.buf[:min(got, want)], nil
		}
		s.at, s.n = 0, 0
		return nil, fmt.Errorf("read %s at %d: %w", s.file.Name(), pos, err)
	}
	s.at, s.n = pos, got
	return s.buf[:want], nil
}

// prepare readies the buffer for a refill that must hold want bytes.
func (s *scanner) prepare(want int) {
	switch {
	case s.keep && s.n > 0:
		s.buf = make([]byte, max(min(2*len(s.buf), readWindowMax), want)) // bytes handed out stay as they are
	case s.lend && (s.n > 0 || len(s.buf) == 0) && len(s.buf) < readWindowMax:
		putBuf(s.pool) // what it lent is gone
		s.buf, s.pool = getBuf(min(max(2*len(s.buf), readWindow), readWindowMax))
	}
	if want > len(s.buf) {
		// A frame larger than the buffer: a buffer of its own, bounded by
		// limit (the callers') and wire.MaxFrameBytes.
		if s.lend {
			putBuf(s.pool)
			s.buf, s.pool = getBuf(want)
		} else {
			s.buf = make([]byte, want)
		}
	}
	s.at, s.n = 0, 0
}

// readChecked checks the frame at pos with header h, larger than any
// window, in parts of proofPart bytes from its first byte, reading what
// the buffer lacks a part at a time and checksumming each part as it
// arrives, while it is still in the CPU's cache, rather than the whole
// frame from memory after. It leaves the checksum's state after each part
// in sums and, for an uncompressed frame, where the records start in
// parts (sumsAt pos). ok is false when a read fails or comes up short:
// the caller then reads the frame through window, whose handling of
// failed reads decides what that means.
func (s *scanner) readChecked(pos int64, h wire.FrameHeader) (frame []byte, err error, ok bool) {
	s.sumsAt = -1
	n := int(h.FrameLen())
	have := 0 // bytes of the frame in the buffer
	switch {
	case pos >= s.at && pos+int64(n) <= s.at+int64(s.n):
		frame, have = s.buf[pos-s.at:][:n], n
	case pos == s.at && len(s.buf) >= n:
		frame, have = s.buf[:n], s.n // the window holds the frame's start: read only the rest
	default:
		s.prepare(n)
		frame = s.buf[:n]
	}
	var sum wire.FrameSum
	s.sums = s.sums[:0]
	s.parts.reset(h.Codec == wire.CodecNone)
	for start := 0; start < n; start += proofPart {
		end := min(start+proofPart, n)
		if from := max(start, have); from < end {
			if got, _ := s.file.ReadAt(frame[from:end], pos+int64(from)); got < end-from {
				return nil, nil, false
			}
		}
		sum.Write(frame[start:end])
		s.sums = append(s.sums, sum)
		s.parts.add(frame[:end])
	}
	s.parts.finish(h, len(s.sums))
	if have < n {
		s.at, s.n = pos, n
	}
	s.sumsAt = pos
	return frame, sum.Check(h), true
}

// frameAt checks the frame starting at pos. For a valid frame it returns
// its header and bytes (valid until the next call; nil for a frame it
// proved in parts: inParts); otherwise the status
// says why, err describes it, and the header is returned when it parsed
// (RecordCount >= 1), CRC unchecked. err is also set, with frameCorrupt,
// for an I/O error; isIOError tells that case apart.
func (s *scanner) frameAt(pos int64) (wire.FrameHeader, []byte, frameStatus, error) {
	if h, frame, ok := s.bufferedFrame(pos); ok {
		return h, frame, frameValid, nil
	}
	return s.readFrame(pos)
}

// readFrame is frameAt for a frame bufferedFrame did not find whole in
// the buffer: it reads what the buffer lacks.
func (s *scanner) readFrame(pos int64) (wire.FrameHeader, []byte, frameStatus, error) {
	head, err := s.window(pos, wire.FrameHeaderSize)
	if err != nil {
		return wire.FrameHeader{}, nil, frameCorrupt, ioError{err}
	}
	h, err := wire.ParseFrameHeader(head)
	if err != nil {
		if errors.Is(err, wire.ErrTruncated) {
			return h, nil, frameTorn, err
		}
		return h, nil, frameCorrupt, err
	}
	if pos+h.FrameLen() > s.limit {
		return h, nil, frameTorn, fmt.Errorf("%w: frame at byte %d claims %d bytes, %d left", wire.ErrTruncated, pos, h.FrameLen(), s.limit-pos)
	}
	if h.FrameLen() > proofPart {
		if s.inParts != nil && h.FrameLen() > proveInPartsOver && h.Codec == wire.CodecNone && h.RecordCount >= 2 && s.inParts(h) && s.proveInParts(pos, h) {
			return h, nil, frameValid, nil
		}
		if frame, err, ok := s.readChecked(pos, h); ok {
			switch {
			case errors.Is(err, wire.ErrTruncated):
				return h, nil, frameTorn, err
			case err != nil:
				return h, nil, frameCorrupt, err
			}
			return h, frame, frameValid, nil
		}
	}
	frame, err := s.window(pos, int(h.FrameLen()))
	if err != nil {
		return h, nil, frameCorrupt, ioError{err}
	}
	if err = h.Verify(frame); errors.Is(err, wire.ErrTruncated) {
		return h, nil, frameTorn, err
	} else if err != nil {
		return h, nil, frameCorrupt, err
	}
	return h, frame, frameValid, nil
}

// bufferedFrame is frameAt's fast path, for the frames of a window read
// already (a catch-up read of small frames): the valid frame at pos when
// the buffer holds it whole and it is no larger than a part (a larger one
// is checked in parts: readChecked), else ok false, and readFrame says
// what is there.
func (s *scanner) bufferedFrame(pos int64) (h wire.FrameHeader, frame []byte, ok bool) {
	if pos < s.at || pos+wire.FrameHeaderSize > s.at+int64(s.n) {
		return h, nil, false
	}
	b := s.buf[pos-s.at : s.n]
	h, err := wire.ParseFrameHeader(b)
	if err != nil || h.FrameLen() > int64(len(b)) || h.FrameLen() > proofPart || pos+h.FrameLen() > s.limit || h.Verify(b) != nil {
		return h, nil, false
	}
	return h, b[:h.FrameLen()], true
}

// zerosFrom reports whether every byte from pos to the scan's limit is
// zero. Only a read that fails is an error.
func (s *scanner) zerosFrom(pos int64) (bool, error) {
	for pos < s.limit {
		chunk, err := s.window(pos, int(min(int64(max(len(s.buf), wire.FrameHeaderSize)), s.limit-pos)))
		if err != nil {
			return false, ioError{err}
		}
		if len(chunk) == 0 {
			return false, nil // the file ends before limit: not what was asked about
		}
		for _, b := range chunk {
			if b != 0 {
				return false, nil
			}
		}
		pos += int64(len(chunk))
	}
	return true, nil
}

// resync looks for where valid frames resume after damage at pos, in a
// log whose next offset was expect (-1: unknown, any base will do). The candidate must claim offsets past
// expect: the damaged frame held at least one record. And when the damaged
// frame's header is plausible (it parsed, claims base expect) and its
// claimed extent lies within the bytes scanned, the search starts past that
// extent: a frame-shaped run of bytes inside a damaged frame's payload is
// record bytes (a value may hold anything), never a frame. Only a header
// that is itself damaged, or claims bytes past the end, is searched from
// pos+1, byte by byte; except that a plausible uncompressed frame claiming
// bytes past the end is a torn tail outright: its two size fields must
// agree, so a bit flip in either makes the header implausible, and what
// follows the start of a torn last frame was all part of its one write
// (partition/doc.go, R2). It returns the candidate's position and header,
// or found=false.
func (s *scanner) resync(pos, expect int64, damaged wire.FrameHeader) (at int64, h wire.FrameHeader, found bool, err error) {
	at = pos + 1
	if damaged.RecordCount >= 1 && (expect < 0 || damaged.BaseOffset == expect) {
		switch {
		case pos+damaged.FrameLen() <= s.limit:
			at = pos + damaged.FrameLen()
		case damaged.Codec == wire.CodecNone:
			return 0, h, false, nil
		}
	}
	magic := []byte{wire.FrameMagic >> 8, wire.FrameMagic & 0xff}
	for at+wire.FrameHeaderSize <= s.limit {
		chunk, err := s.window(at, len(s.buf))
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
		h, _, status, err := s.frameAt(at)
		if err != nil && isIOError(err) {
			return 0, h, false, err
		}
		if status == frameValid && h.BaseOffset > expect {
			return at, h, true, nil
		}
		at++
	}
	return 0, h, false, nil
}

// ioError marks a scan failure that is the file system's, not the data's:
// a read that failed is never taken for damage.
type ioError struct{ err error }

func (e ioError) Error() string { return e.err.Error() }
func (e ioError) Unwrap() error { return e.err }

func isIOError(err error) bool {
	var e ioError
	return errors.As(err, &e)
}
