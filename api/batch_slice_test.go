package api

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/narad-io/storage/internal/testmem"
)

func sliceRecords(body []byte) ([]pair, int, error) {
	bs := NewBatchSlice(body, maxLen)
	count, cerr := bs.Count(false, math.MaxInt)
	var out []pair
	for {
		key, value, err := bs.Record()
		if err == io.EOF {
			return out, count, cerr
		}
		if err != nil {
			return nil, count, err
		}
		out = append(out, pair{key, value})
	}
}

func sliceFetched(answer []byte) ([]BatchRecord, int, error) {
	bs := NewBatchSlice(answer, maxLen)
	count, cerr := bs.Count(true, math.MaxInt)
	var out []BatchRecord
	for {
		r, err := bs.Fetched()
		if err == io.EOF {
			return out, count, cerr
		}
		if err != nil {
			return nil, count, err
		}
		out = append(out, r)
	}
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// FuzzBatchSlice: whatever a produce body or a fetch answer holds, the
// slice reader refuses it with BatchReader's error, or returns
// BatchReader's records, as many as Count said.
func FuzzBatchSlice(f *testing.F) {
	f.Add(appendRecords(nil, []pair{{[]byte("k"), []byte("v")}, {nil, []byte{}}}))
	f.Add(appendFetched(nil, []BatchRecord{{Offset: 3, Key: []byte("k"), Value: []byte("value")}, {Offset: 4, Value: []byte{}}}))
	f.Add(appendFetched(nil, []BatchRecord{{Offset: -1}})[:17])
	f.Add(binary.AppendUvarint(make([]byte, 16), 64<<20))
	f.Add(binary.AppendUvarint(nil, 1<<40))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Add([]byte{0x80, 0x80, 0x80})
	f.Fuzz(func(t *testing.T, body []byte) {
		want, werr := readRecords(body)
		got, count, err := sliceRecords(body)
		same := func(a, b pair) bool { return bytes.Equal(a.key, b.key) && bytes.Equal(a.value, b.value) }
		if !sameErr(err, werr) || !slices.EqualFunc(got, want, same) {
			t.Fatalf("produce body: sliced %d records, %v; BatchReader %d, %v", len(got), err, len(want), werr)
		}
		if werr == nil && count != len(want) {
			t.Fatalf("produce body: Count %d of %d records", count, len(want))
		}
		for _, r := range got {
			if r.key == nil || r.value == nil || cap(r.key) != len(r.key) || cap(r.value) != len(r.value) {
				t.Fatalf("a record %q %q: nil, or room past its end (cap %d, %d)", r.key, r.value, cap(r.key), cap(r.value))
			}
		}
		wantF, werr := readFetched(body)
		gotF, count, err := sliceFetched(body)
		if !sameErr(err, werr) || !slices.EqualFunc(gotF, wantF, func(a, b BatchRecord) bool {
			return a.Offset == b.Offset && a.CommittedAtMs == b.CommittedAtMs && bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value)
		}) {
			t.Fatalf("fetch answer: sliced %d records, %v; BatchReader %d, %v", len(gotF), err, len(wantF), werr)
		}
		if werr == nil && count != len(wantF) {
			t.Fatalf("fetch answer: Count %d of %d records", count, len(wantF))
		}
	})
}

// TestBatchSlice_RecordsAreTheBodysBytes: a record read from a body is
// the body's bytes, not a copy: a body changed under its records changes
// them (why a caller keeps the body as it is while it uses them).
func TestBatchSlice_RecordsAreTheBodysBytes(t *testing.T) {
	body := appendRecords(nil, []pair{{[]byte("key"), []byte("value")}})
	key, value, err := NewBatchSlice(body, maxLen).Record()
	if err != nil {
		t.Fatal(err)
	}
	copy(body, appendRecords(nil, []pair{{[]byte("KEY"), []byte("VALUE")}}))
	if string(key) != "KEY" || string(value) != "VALUE" {
		t.Fatalf("after the body changed its record reads %q %q", key, value)
	}
}

// TestReadBody_GrowsAsTheBytesCome: a body is read whole, of a length
// known or not, one byte a read or all at once, into a pooled buffer
// without growing it; a 3-byte body declared as 64 MiB allocates about
// what it holds, and a body longer than it said is read whole.
func TestReadBody_GrowsAsTheBytesCome(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 100_000)
	for _, size := range []int64{int64(len(body)), -1} {
		for _, r := range []io.Reader{bytes.NewReader(body), iotest.HalfReader(bytes.NewReader(body)), iotest.OneByteReader(bytes.NewReader(body[:5000]))} {
			got, err := ReadBody(r, nil, size)
			if err != nil || !bytes.HasPrefix(body, got) || (len(got) != len(body) && len(got) != 5000) {
				t.Fatalf("size %d: read %d bytes, %v", size, len(got), err)
			}
		}
	}
	pooled := make([]byte, 0, len(body))
	got, err := ReadBody(bytes.NewReader(body), pooled, int64(len(body)))
	if err != nil || !bytes.Equal(got, body) || &got[0] != &pooled[:1][0] {
		t.Fatalf("into a buffer of room enough: %d bytes, %v, the buffer replaced: %v", len(got), err, &got[0] != &pooled[:1][0])
	}
	var n int
	if alloc := testmem.Allocated(func() { got, err = ReadBody(bytes.NewReader([]byte("abc")), nil, 64<<20); n = len(got) }); err != nil || n != 3 || alloc > 256<<10 {
		t.Fatalf("a 3-byte body declared as 64 MiB: %d bytes, %v, allocated %d", n, err, alloc)
	}
	if alloc := testmem.Allocated(func() { got, err = ReadBody(bytes.NewReader([]byte("abc")), nil, -1); n = len(got) }); err != nil || n != 3 || alloc > 16<<10 {
		t.Fatalf("a 3-byte body of a length not known: %d bytes, %v, allocated %d", n, err, alloc)
	}
	if got, err = ReadBody(bytes.NewReader(body), nil, 10); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("a body longer than it said: %d bytes, %v", len(got), err)
	}
	cut := iotest.DataErrReader(iotest.TimeoutReader(bytes.NewReader(body)))
	if _, err := ReadBody(cut, nil, -1); err != iotest.ErrTimeout {
		t.Fatalf("a failing reader: %v", err)
	}
}

// TestBatchSlice_CountStopsPastItsLimit: a body of tens of millions of
// empty records is counted to the caller's bound and one past, not to
// its end (a produce body over 100,000 records is refused after that
// much of a scan: counting a 64 MiB body of them took 368 ms of CPU).
func TestBatchSlice_CountStopsPastItsLimit(t *testing.T) {
	body := make([]byte, 1<<20) // 524,288 produce records of an empty key and value
	bs := NewBatchSlice(body, 1<<20)
	if n, err := bs.Count(false, MaxProduceRecords); n != MaxProduceRecords+1 || err != nil {
		t.Fatalf("Count with a limit of %d: %d, %v; want %d", MaxProduceRecords, n, err, MaxProduceRecords+1)
	}
	if n, err := bs.Count(false, math.MaxInt); n != len(body)/2 || err != nil {
		t.Fatalf("Count with no limit: %d, %v; want %d", n, err, len(body)/2)
	}
}
