package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// BatchMediaType is the binary batch encoding's media type: a produce
// body's Content-Type, a fetch's Accept and its answer's Content-Type.
const BatchMediaType = "application/vnd.narad.batch"

// The headers of a binary fetch answer, which carries no JSON around its
// records: where to fetch next and the high watermark (in the trailer
// instead when the answer is streamed), and the topic's incarnation.
const (
	HeaderNextOffset    = "Narad-Next-Offset"
	HeaderHighWatermark = "Narad-High-Watermark"
	HeaderIncarnation   = "Narad-Incarnation"
)

// The binary batch encoding of records (docs/http-api.md, "Produce" and
// "Fetch"), record after record with nothing around them:
//
//	produce body:  uvarint(len(key)) key uvarint(len(value)) value
//	fetch answer:  int64 offset, int64 committed_at_ms (big-endian),
//	               then as a produce body's record
//
// A record of a produce body has no key when its key is empty.

// fetchedHeadSize is a fetch answer's fixed bytes of a record: its offset
// and its commit time.
const fetchedHeadSize = 16

// BatchRecord is a record of a binary fetch answer.
type BatchRecord struct {
	Offset        int64
	CommittedAtMs int64 // milliseconds since the epoch
	Key, Value    []byte
}

// FetchedSize is the bytes of a fetch answer's record of a key and a value
// of these lengths, as BatchWriter.Fetched writes it.
func FetchedSize(keyLen, valueLen int) int {
	return fetchedHeadSize + uvarintLen(keyLen) + keyLen + uvarintLen(valueLen) + valueLen
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// BatchWriter writes records in the binary batch encoding to a writer,
// each key and value straight from the caller's slice, never copied
// first. The zero value writes nowhere until Reset.
type BatchWriter struct {
	w    io.Writer
	head [fetchedHeadSize + binary.MaxVarintLen64]byte // a record's fixed fields and a length
}

// NewBatchWriter returns a BatchWriter that writes to w.
func NewBatchWriter(w io.Writer) *BatchWriter { return &BatchWriter{w: w} }

// Reset makes bw write to w.
func (bw *BatchWriter) Reset(w io.Writer) { bw.w = w }

// Record writes a produce body's record.
func (bw *BatchWriter) Record(key, value []byte) error {
	return bw.write(binary.AppendUvarint(bw.head[:0], uint64(len(key))), key, value)
}

// AppendRecord appends a produce body's record to b and returns it: the
// bytes Record writes, for a caller building a body in memory.
func AppendRecord(b, key, value []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}

// Fetched writes a fetch answer's record: FetchedSize bytes.
func (bw *BatchWriter) Fetched(r BatchRecord) error {
	b := binary.BigEndian.AppendUint64(bw.head[:0], uint64(r.Offset))
	b = binary.BigEndian.AppendUint64(b, uint64(r.CommittedAtMs))
	return bw.write(binary.AppendUvarint(b, uint64(len(r.Key))), r.Key, r.Value)
}

// write writes a record's bytes from its key on: head (ending in the
// key's length), the key, the value's length and the value.
func (bw *BatchWriter) write(head, key, value []byte) error {
	if _, err := bw.w.Write(head); err != nil {
		return err
	}
	if _, err := bw.w.Write(key); err != nil {
		return err
	}
	if _, err := bw.w.Write(binary.AppendUvarint(bw.head[:0], uint64(len(value)))); err != nil {
		return err
	}
	_, err := bw.w.Write(value)
	return err
}

// firstPiece is the first piece a key or value is read in.
const firstPiece = 64 << 10

// BatchReader reads records of the binary batch encoding as they come.
// Every length is checked against the reader's bound before anything is
// allocated, and a key or value is read in pieces, each as large as all
// before it (64 KiB first), joined once: a whole one costs about twice its
// length, and a length the body does not hold fails at the body's end
// having allocated about twice what the body held, never the length it
// claimed.
//
// An error names the record by its index and says what was wrong in the
// body's terms ("record 3: value: the body ends 10 bytes into its 64");
// an error of the underlying reader is returned as it is at a record's
// start, and wrapped with where inside one.
//
// Its read buffer and pack blocks are sized to the body: to its length
// when known, else from readStartBytes doubling while the body fills
// them, up to readBufferBytes and packBlock; a tiny body costs a tiny
// buffer.
type BatchReader struct {
	src       countingReader // the body, its bytes counted
	r         *bufio.Reader  // reads src; replaced by a larger one only when empty
	bufSize   int            // r's size
	known     bool           // the body's length was given: r's size is final
	maxLen    uint64         // the bound on one key or value
	n         int            // records read
	head      [fetchedHeadSize]byte
	pack      bool   // PackSmall
	block     []byte // what is left of the block small keys and values are read into
	blockSize int    // the next block's size
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// PackSmall makes the reader read keys and values of at most packMax
// bytes into shared blocks of packBlock bytes, one allocation for many
// records rather than one each. A key or value returned still has its
// own capacity (appending to it copies), but keeps its whole block in
// memory while it is held: for a reader whose records are dropped
// together (a produce body, committed then released), not one whose
// caller keeps a few.
func (br *BatchReader) PackSmall() { br.pack = true }

// PackSmall's sizes: a block wastes at most packMax bytes at its end.
const (
	packMax   = 1 << 10
	packBlock = 64 << 10
)

// NewBatchReader returns a reader of r's records whose keys and values
// are at most maxLen bytes each; r's length is not known.
func NewBatchReader(r io.Reader, maxLen int) *BatchReader {
	return NewBatchReaderSize(r, maxLen, -1)
}

// NewBatchReaderSize is NewBatchReader for a body of size bytes (a
// request's Content-Length), or of a length not known when size < 0.
func NewBatchReaderSize(r io.Reader, maxLen int, size int64) *BatchReader {
	br := &BatchReader{src: countingReader{r: r}, maxLen: uint64(maxLen), bufSize: readStartBytes, blockSize: readStartBytes}
	if size >= 0 {
		br.known = true
		br.bufSize = int(min(size, readBufferBytes))
		br.blockSize = int(min(size, packBlock))
	}
	br.r = bufio.NewReaderSize(&br.src, br.bufSize)
	return br
}

// readBufferBytes is a BatchReader's largest read buffer: a body of small
// records is read from r in reads this large, not one a few records.
// readStartBytes is the first read buffer and pack block of a body of a
// length not known.
const (
	readBufferBytes = 64 << 10
	readStartBytes  = 4 << 10
)

// Record reads a produce body's next record; io.EOF at the body's end,
// before a record.
func (br *BatchReader) Record() (key, value []byte, err error) {
	if err := br.start(); err != nil {
		return nil, nil, err
	}
	return br.keyValue()
}

// Fetched reads a fetch answer's next record; io.EOF at the answer's end,
// before a record.
func (br *BatchReader) Fetched() (BatchRecord, error) {
	if err := br.start(); err != nil {
		return BatchRecord{}, err
	}
	if _, err := io.ReadFull(br.r, br.head[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return BatchRecord{}, fmt.Errorf("record %d: the body ends inside its offset and commit time", br.n)
		}
		return BatchRecord{}, fmt.Errorf("record %d: %w", br.n, err)
	}
	r := BatchRecord{Offset: int64(binary.BigEndian.Uint64(br.head[:8])), CommittedAtMs: int64(binary.BigEndian.Uint64(br.head[8:]))}
	var err error
	r.Key, r.Value, err = br.keyValue()
	return r, err
}

// start reports io.EOF at the body's end, where the next record would
// start.
func (br *BatchReader) start() error {
	if !br.known && br.bufSize < readBufferBytes && br.r.Buffered() == 0 && br.src.n >= int64(br.bufSize) {
		br.bufSize *= 2 // the body filled the buffer: read it in larger reads
		br.r = bufio.NewReaderSize(&br.src, br.bufSize)
	}
	if _, err := br.r.Peek(1); errors.Is(err, io.EOF) {
		return io.EOF
	} else if err != nil {
		return err
	}
	return nil
}

// keyValue reads a record's key and value, each after its length.
func (br *BatchReader) keyValue() (key, value []byte, err error) {
	if key, err = br.chunk(); err != nil {
		return nil, nil, fmt.Errorf("record %d: key: %w", br.n, err)
	}
	if value, err = br.chunk(); err != nil {
		return nil, nil, fmt.Errorf("record %d: value: %w", br.n, err)
	}
	br.n++
	return key, value, nil
}

// chunk reads a length and as many bytes.
func (br *BatchReader) chunk() ([]byte, error) {
	n, err := binary.ReadUvarint(br.r)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, errors.New("the body ends inside its length")
	}
	if err != nil {
		return nil, errors.New("its length is not a valid uvarint")
	}
	if n > br.maxLen {
		return nil, fmt.Errorf("length %d over the %d-byte record bound", n, br.maxLen)
	}
	if n == 0 {
		return []byte{}, nil // empty, never nil, packed or not
	}
	if n <= firstPiece { // one piece, as most are: read whole at once
		var piece []byte
		if br.pack && n <= packMax {
			if uint64(len(br.block)) < n {
				br.block = make([]byte, max(br.blockSize, int(n)))
				br.blockSize = min(2*br.blockSize, packBlock)
			}
			piece, br.block = br.block[:n:n], br.block[n:]
		} else {
			piece = make([]byte, n)
		}
		if got, err := io.ReadFull(br.r, piece); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("the body ends %d bytes into its %d", got, n)
			}
			return nil, err
		}
		return piece, nil
	}
	var pieces [][]byte
	for read := uint64(0); read < n; {
		piece := make([]byte, min(n-read, max(read, firstPiece)))
		got, err := io.ReadFull(br.r, piece)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("the body ends %d bytes into its %d", read+uint64(got), n)
			}
			return nil, err
		}
		pieces = append(pieces, piece)
		read += uint64(got)
	}
	if len(pieces) == 1 {
		return pieces[0], nil
	}
	return bytes.Join(pieces, nil), nil
}
