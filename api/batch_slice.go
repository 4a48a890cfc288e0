package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// BatchSlice reads the records of a binary batch held whole in memory (a
// body read to its end, ReadBody): each key and value is a slice of the
// body, never copied, its capacity cut at its end so appending to it
// copies. It refuses what BatchReader refuses, with the same errors, and
// returns the same records; it only saves the copy and the reads of a
// record at a time. The body must not change while its records are used.
type BatchSlice struct {
	b      []byte
	off    int
	maxLen uint64 // the bound on one key or value
	n      int    // records read
}

// NewBatchSlice returns a reader of body's records whose keys and values
// are at most maxLen bytes each.
func NewBatchSlice(body []byte, maxLen int) *BatchSlice {
	return &BatchSlice{b: body, maxLen: uint64(maxLen)}
}

// Record reads a produce body's next record; io.EOF at the body's end,
// before a record.
func (bs *BatchSlice) Record() (key, value []byte, err error) {
	if bs.off == len(bs.b) {
		return nil, nil, io.EOF
	}
	return bs.keyValue()
}

// Fetched reads a fetch answer's next record; io.EOF at the answer's end,
// before a record.
func (bs *BatchSlice) Fetched() (BatchRecord, error) {
	if bs.off == len(bs.b) {
		return BatchRecord{}, io.EOF
	}
	if len(bs.b)-bs.off < fetchedHeadSize {
		return BatchRecord{}, fmt.Errorf("record %d: the body ends inside its offset and commit time", bs.n)
	}
	head := bs.b[bs.off : bs.off+fetchedHeadSize]
	bs.off += fetchedHeadSize
	r := BatchRecord{Offset: int64(binary.BigEndian.Uint64(head[:8])), CommittedAtMs: int64(binary.BigEndian.Uint64(head[8:]))}
	var err error
	r.Key, r.Value, err = bs.keyValue()
	return r, err
}

// Count is the number of records the rest of the body holds (produce
// records, or a fetch answer's when fetched), or the error reading them
// would meet; the reader's place does not move. A caller sizes its list
// of records with it, exactly, before reading them. It stops at limit+1
// records, so a body of millions of tiny records past the caller's bound
// costs the bound's scan, not the body's.
func (bs *BatchSlice) Count(fetched bool, limit int) (int, error) {
	saved := *bs
	defer func() { *bs = saved }()
	for n := 0; ; n++ {
		if n > limit {
			return n, nil
		}
		var err error
		if fetched {
			_, err = bs.Fetched()
		} else {
			_, _, err = bs.Record()
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// keyValue reads a record's key and value, each after its length.
func (bs *BatchSlice) keyValue() (key, value []byte, err error) {
	if key, err = bs.chunk(); err != nil {
		return nil, nil, fmt.Errorf("record %d: key: %w", bs.n, err)
	}
	if value, err = bs.chunk(); err != nil {
		return nil, nil, fmt.Errorf("record %d: value: %w", bs.n, err)
	}
	bs.n++
	return key, value, nil
}

// chunk reads a length and as many bytes, as BatchReader.chunk does.
func (bs *BatchSlice) chunk() ([]byte, error) {
	n, size := binary.Uvarint(bs.b[bs.off:])
	switch {
	case size == 0 && len(bs.b)-bs.off >= binary.MaxVarintLen64:
		return nil, errors.New("its length is not a valid uvarint") // ten bytes of continuation, as ReadUvarint sees it
	case size == 0:
		return nil, errors.New("the body ends inside its length")
	case size < 0:
		return nil, errors.New("its length is not a valid uvarint")
	case n > bs.maxLen:
		return nil, fmt.Errorf("length %d over the %d-byte record bound", n, bs.maxLen)
	}
	bs.off += size
	if left := uint64(len(bs.b) - bs.off); n > left {
		bs.off = len(bs.b)
		return nil, fmt.Errorf("the body ends %d bytes into its %d", left, n)
	}
	if n == 0 {
		return []byte{}, nil // empty, never nil
	}
	end := bs.off + int(n)
	piece := bs.b[bs.off:end:end]
	bs.off = end
	return piece, nil
}

// ReadBody reads r to its end into buf (from its length on, growing it
// as the bytes come) and returns it. size is r's length when known (a
// Content-Length), -1 when not. The buffer grows by doubling from 64 KiB
// (from 4 KiB when the length is not known), never past a known length
// nor ahead of the bytes received: a length that lies costs no more than
// about twice what the body held, and a tiny body a tiny buffer. A caller
// that pools buffers passes one back in buf (its length 0); nil starts a
// new one.
func ReadBody(r io.Reader, buf []byte, size int64) ([]byte, error) {
	for {
		if len(buf) == cap(buf) && size >= 0 && int64(len(buf)) >= size {
			// The end is due: see it without growing the buffer.
			var probe [1]byte
			n, err := r.Read(probe[:])
			buf = append(buf, probe[:n]...) // a body longer than it said grows
			if err == io.EOF {
				return buf, nil
			}
			if err != nil {
				return buf, err
			}
			continue
		}
		if len(buf) == cap(buf) {
			grow := max(cap(buf), readStartBytes)
			if size >= 0 {
				grow = int(min(int64(max(grow, readBodyStart)), size-int64(len(buf))))
			}
			buf = append(buf, make([]byte, grow)...)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// readBodyStart is ReadBody's first buffer for a body of a known length.
const readBodyStart = 64 << 10
