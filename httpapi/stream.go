package httpapi

import (
	"bufio"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/wire"
)

// answerBufferSize is the write buffer of a records answer: an answer that
// fits in it goes out whole, with its headers exact; a larger one goes out
// as the buffer fills. An answer whose max_bytes is at least
// largeAnswerBufferSize has a buffer that large: a default fetch of 1,000
// records of 100 bytes (about 118 KB) is then one read of the log and one
// write with its length, where in 64 KiB it was two reads, and the
// consume command read 1,000,000 such records about 8% faster. Either is
// written to the client a 64 KiB part at a time (sentWriter).
const (
	answerBufferSize      = 64 << 10
	largeAnswerBufferSize = 256 << 10
)

// answerStall (a variable for tests) bounds how long a client may take to
// accept one write of an answer (at most a buffer's worth): a client that
// stops reading is cut then, and gives its answer budget back, not at the
// server's five-minute write timeout.
var answerStall = 10 * time.Second

// answerWriters and largeAnswerWriters pool the write buffers of records
// answers, of each size.
var (
	answerWriters      = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, answerBufferSize) }}
	largeAnswerWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, largeAnswerBufferSize) }}
)

// answerWriter returns a pooled write buffer for an answer of at most
// limit bytes of records.
func answerWriter(limit int) *bufio.Writer {
	if limit >= largeAnswerBufferSize {
		return largeAnswerWriters.Get().(*bufio.Writer)
	}
	return answerWriters.Get().(*bufio.Writer)
}

// errAnswerFull ends a read whose next record would take the answer past
// its max_bytes; errBufferFull one whose next record does not fit what
// is left of the write buffer (writing it would flush to the client while
// the read lends it: pending names it).
var (
	errAnswerFull = errors.New("the answer holds max_bytes")
	errBufferFull = errors.New("the write buffer is full")
)

// recordStream writes a records answer (a fetch's, a cursor read's, a
// queue consume's) as the records come, in JSON (text or base64: written
// here, and held to httpapi's answer types by its tests) or the binary
// batch encoding (api.BatchWriter), through its own write buffer: a
// record that fits
// the buffer is copied nowhere else on its way out, and no escaping grows
// it beyond its encoding (docs/http-api.md, "Fetch": how max_bytes bounds
// an answer).
//
// A record a read lends is written only into what is left of the buffer,
// never flushed while lent: a client that stops reading holds the
// answer's budget, never the read's frame buffer or segment (offer stops
// the read; the caller flushes and reads on). A record larger than the
// whole buffer is written from a copy of its own (the caller's).
//
// Invariants: until the buffer first fills nothing was sent, so an error
// can still be answered in its place (discard); from then on (sent) the
// answer can only be cut (abort). count records were written, the last at
// offset last; used is their encoded bytes, separators included. pending
// is the offset and encoded size of the record offer last refused with
// errBufferFull.
type recordStream struct {
	w     http.ResponseWriter
	out   sentWriter
	bw    *bufio.Writer
	batch bool
	b64   bool
	limit int // max_bytes of the records' encoding; the first record always goes

	count   int
	used    int
	last    int64
	pending struct {
		offset int64
		size   int
	}
	bounded bool            // the binary boundary went out in the headers (boundary)
	enc     api.BatchWriter // a binary answer's records, to bw
	buf     []byte          // scratch for a JSON record's fixed fields, in scratch
	scratch [64]byte        // room for buf: two int64s and their field names
}

// sentWriter notes the first write through to the client, and gives each
// write of at most a buffer's worth answerStall to be taken: a larger one
// (a record larger than the buffer, written from its copy) goes a
// buffer's worth at a time, so a client is never given answerStall for a
// whole record of any size.
type sentWriter struct {
	http.ResponseWriter
	conn writeDeadliner // nil: none (a test's recorder)
	sent bool
}

type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

func (s *sentWriter) Write(p []byte) (n int, err error) {
	if !s.sent {
		s.sent, s.conn = true, deadlinerOf(s.ResponseWriter)
	}
	for {
		part := p[n:min(len(p), n+answerBufferSize)]
		if s.conn != nil {
			s.conn.SetWriteDeadline(time.Now().Add(answerStall))
		}
		m, err := s.ResponseWriter.Write(part)
		if n += m; err != nil || n == len(p) {
			return n, err
		}
	}
}

// deadlinerOf finds the connection's write deadline under w's wrappers,
// as http.ResponseController does, without allocating one.
func deadlinerOf(w http.ResponseWriter) writeDeadliner {
	for {
		if d, ok := w.(writeDeadliner); ok {
			return d
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

// newRecordStream starts an answer of 200 to w. The records go in JSON
// unless batch, in base64 when b64 (JSON only).
func newRecordStream(w http.ResponseWriter, batch, b64 bool, limit int) *recordStream {
	s := &recordStream{w: w, out: sentWriter{ResponseWriter: w}, bw: answerWriter(limit), batch: batch, b64: b64, limit: limit, last: -1}
	s.bw.Reset(&s.out)
	s.enc.Reset(s.bw)
	s.buf = s.scratch[:0]
	if batch {
		w.Header().Set("Content-Type", api.BatchMediaType)
	} else {
		w.Header().Set("Content-Type", "application/json")
		s.bw.WriteString(`{"records":[`)
	}
	return s
}

// offer writes r unless it would take the answer past max_bytes (and it
// is not the first), then errAnswerFull. A record at or below the last one
// written (a read retried after its log closed lends again from its
// start) is passed over.
func (s *recordStream) offer(r partition.ReadRecord) error {
	if s.count > 0 && r.Offset <= s.last {
		return nil
	}
	b64 := s.base64(r)
	size := s.size(r, b64)
	if s.count > 0 && s.used+size > s.limit {
		return errAnswerFull
	}
	if size > s.bw.Available() {
		s.pending.offset, s.pending.size = r.Offset, size
		return errBufferFull
	}
	s.write(r, b64, size, "")
	return nil
}

// copied writes r, a copy the caller holds (a record larger than the
// buffer), flushing as it goes.
func (s *recordStream) copied(r partition.ReadRecord) {
	b64 := s.base64(r)
	s.write(r, b64, s.size(r, b64), "")
}

// flush sends what the buffer holds, outside any lending read; a client
// gone meanwhile cuts the answer.
func (s *recordStream) flush() {
	if err := s.bw.Flush(); err != nil {
		panic(http.ErrAbortHandler)
	}
}

// boundary gives a binary answer's Narad-Next-Offset and
// Narad-High-Watermark as headers before its records are sent: an answer
// that cannot carry trailers (HTTP/1.0), of one record larger than the
// buffer.
func (s *recordStream) boundary(next, hwm int64) {
	s.w.Header().Set(api.HeaderNextOffset, strconv.FormatInt(next, 10))
	s.w.Header().Set(api.HeaderHighWatermark, strconv.FormatInt(hwm, 10))
	s.bounded = true
}

// writeAll writes records already in hand (a cursor's read, a consume's
// leases), each with the extra JSON fields extra gives it ("" none: it
// must start with a comma), whatever their size.
func (s *recordStream) writeAll(n int, record func(i int) (partition.ReadRecord, string)) {
	for i := range n {
		r, extra := record(i)
		b64 := s.base64(r)
		s.write(r, b64, s.size(r, b64)+len(extra), extra)
	}
}

// base64 reports whether r goes in base64: asked for, or JSON text could
// not carry its bytes exactly (not valid UTF-8; flagged in the record).
func (s *recordStream) base64(r partition.ReadRecord) bool {
	return !s.batch && (s.b64 || !utf8.Valid(r.Key) || !utf8.Valid(r.Value))
}

// write writes one record of size encoded bytes: separator, fixed
// fields, key and value.
func (s *recordStream) write(r partition.ReadRecord, b64 bool, size int, extra string) {
	s.count, s.used, s.last = s.count+1, s.used+size, r.Offset
	if s.batch {
		s.enc.Fetched(api.BatchRecord{Offset: r.Offset, CommittedAtMs: r.CommittedAtUnixMs, Key: r.Key, Value: r.Value})
		return
	}
	if s.count > 1 {
		s.bw.WriteByte(',')
	}
	s.buf = strconv.AppendInt(append(s.buf[:0], `{"offset":`...), r.Offset, 10)
	s.bw.Write(s.buf)
	if len(r.Key) > 0 {
		s.bw.WriteString(`,"key":`)
		s.bytes(r.Key, b64)
	}
	s.bw.WriteString(`,"value":`)
	s.bytes(r.Value, b64)
	if b64 && !s.b64 {
		s.bw.WriteString(`,"encoding":"base64"`)
	}
	s.buf = strconv.AppendInt(append(s.buf[:0], `,"committed_at_ms":`...), r.CommittedAtUnixMs, 10)
	s.bw.Write(s.buf)
	s.bw.WriteString(extra)
	s.bw.WriteByte('}')
}

// size is a record's encoded bytes but its extra fields, exactly, so an
// answer's records never pass max_bytes.
func (s *recordStream) size(r partition.ReadRecord, b64 bool) int {
	key, value := r.Key, r.Value
	if s.batch {
		return api.FetchedSize(len(key), len(value))
	}
	n := len(`{"offset":,"value":,"committed_at_ms":}`) + decimalLen(r.Offset) + decimalLen(r.CommittedAtUnixMs)
	if s.count > 0 {
		n++ // the separator
	}
	if len(key) > 0 {
		n += len(`,"key":`) + jsonBytesLen(key, b64)
	}
	n += jsonBytesLen(value, b64)
	if b64 && !s.b64 {
		n += len(`,"encoding":"base64"`)
	}
	return n
}

// bytes writes b as a JSON string: base64, or text escaped as JSON needs
// (quote, backslash, control characters) and nothing more.
func (s *recordStream) bytes(b []byte, b64 bool) {
	s.bw.WriteByte('"')
	if b64 {
		enc := base64.NewEncoder(base64.StdEncoding, s.bw)
		enc.Write(b)
		enc.Close()
	} else {
		start := 0
		for i, c := range b {
			if c >= 0x20 && c != '"' && c != '\\' {
				continue
			}
			s.bw.Write(b[start:i])
			switch c {
			case '"', '\\':
				s.bw.WriteByte('\\')
				s.bw.WriteByte(c)
			case '\n':
				s.bw.WriteString(`\n`)
			case '\r':
				s.bw.WriteString(`\r`)
			case '\t':
				s.bw.WriteString(`\t`)
			default:
				const hex = "0123456789abcdef"
				s.bw.WriteString(`\u00`)
				s.bw.WriteByte(hex[c>>4])
				s.bw.WriteByte(hex[c&0xf])
			}
			start = i + 1
		}
		s.bw.Write(b[start:])
	}
	s.bw.WriteByte('"')
}

// jsonBytesLen is the length of b as a JSON string (quotes included).
func jsonBytesLen(b []byte, b64 bool) int {
	if b64 {
		return 2 + base64.StdEncoding.EncodedLen(len(b))
	}
	n := 2 + len(b)
	for _, c := range b {
		n += int(jsonExtra[c])
	}
	return n
}

func decimalLen(v int64) int {
	var b [20]byte
	return len(strconv.AppendInt(b[:0], v, 10))
}

// finish ends the answer: JSON's closing fields (tail holds them after
// "]", starting with a comma), or the batch's Narad-Next-Offset and
// Narad-High-Watermark, as headers when nothing was sent yet, else as
// trailers.
func (s *recordStream) finish(next, hwm int64, tail []byte) {
	if s.batch && !s.bounded {
		prefix := ""
		if s.out.sent {
			prefix = http.TrailerPrefix
		}
		s.w.Header().Set(prefix+api.HeaderNextOffset, strconv.FormatInt(next, 10))
		s.w.Header().Set(prefix+api.HeaderHighWatermark, strconv.FormatInt(hwm, 10))
	} else if !s.batch {
		s.bw.WriteByte(']')
		s.bw.Write(tail)
		s.bw.WriteString("}\n")
	}
	if !s.out.sent {
		// The whole answer is in the buffer: its length goes with it, so
		// a client reads it into one buffer of that size.
		s.w.Header().Set("Content-Length", strconv.Itoa(s.bw.Buffered()))
	}
	s.bw.Flush()
	s.release()
}

// release gives the write buffer back; the stream is done with.
func (s *recordStream) release() {
	s.enc.Reset(nil)
	s.bw.Reset(nil)
	if s.bw.Size() == largeAnswerBufferSize {
		largeAnswerWriters.Put(s.bw)
	} else {
		answerWriters.Put(s.bw)
	}
	s.bw = nil
}

// fail answers err in the stream's place when nothing was sent yet
// (answer writes the error), and reports it; once part of the answer is
// out, the answer is cut (the connection dropped), never ended as if
// whole.
func (s *recordStream) fail(answer func(http.ResponseWriter)) {
	if s.out.sent {
		panic(http.ErrAbortHandler)
	}
	s.release()
	answer(s.w)
}

// boundaryJSON is a read answer's closing fields after its records.
func boundaryJSON(next, hwm int64, inc wire.IncarnationID) []byte {
	b := make([]byte, 0, 96)
	b = strconv.AppendInt(append(b, `,"next_offset":`...), next, 10)
	b = strconv.AppendInt(append(b, `,"high_watermark":`...), hwm, 10)
	return strconv.AppendQuote(append(b, `,"incarnation":`...), string(inc))
}

// jsonExtra is how many bytes JSON's escape of a byte adds to it.
var jsonExtra = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = 5 // \u00XX
	}
	t['"'], t['\\'], t['\n'], t['\r'], t['\t'] = 1, 1, 1, 1, 1
	return t
}()
