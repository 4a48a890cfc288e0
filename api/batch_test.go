package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/narad-io/storage/internal/testmem"
)

// maxLen is the bound on a key or value the tests read with: the
// client's (the server reads a produce body with the engine's record
// bound, a little under it).
const maxLen = 64 << 20

type pair struct{ key, value []byte }

// appendRecords is a produce body of records, as BatchWriter writes it.
func appendRecords(b []byte, recs []pair) []byte {
	buf := bytes.NewBuffer(b)
	bw := NewBatchWriter(buf)
	for _, r := range recs {
		bw.Record(r.key, r.value)
	}
	return buf.Bytes()
}

// appendFetched is a fetch answer of records, as BatchWriter writes it.
func appendFetched(b []byte, recs []BatchRecord) []byte {
	buf := bytes.NewBuffer(b)
	bw := NewBatchWriter(buf)
	for _, r := range recs {
		bw.Fetched(r)
	}
	return buf.Bytes()
}

func readRecords(body []byte) ([]pair, error) { return readRecordsPacked(body, false) }

func readRecordsPacked(body []byte, pack bool) ([]pair, error) {
	br := NewBatchReader(bytes.NewReader(body), maxLen)
	if pack {
		br.PackSmall()
	}
	var out []pair
	for {
		key, value, err := br.Record()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, pair{key, value})
	}
}

func readFetched(answer []byte) ([]BatchRecord, error) {
	br := NewBatchReader(bytes.NewReader(answer), maxLen)
	var out []BatchRecord
	for {
		r, err := br.Fetched()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
}

// TestBatch_TheDocumentedBytes: a produce body's record is
// uvarint(len(key)) key uvarint(len(value)) value, and a fetch answer's
// the same after its offset and commit time as big-endian int64s
// (docs/http-api.md); FetchedSize is what a fetch answer's record takes.
func TestBatch_TheDocumentedBytes(t *testing.T) {
	body := appendRecords(nil, []pair{{[]byte("k"), []byte("value")}, {nil, bytes.Repeat([]byte{7}, 200)}})
	want := append([]byte{1, 'k', 5, 'v', 'a', 'l', 'u', 'e', 0, 0xc8, 0x01}, bytes.Repeat([]byte{7}, 200)...)
	if !bytes.Equal(body, want) {
		t.Fatalf("produce body %x, want %x", body, want)
	}
	r := BatchRecord{Offset: 0x0102, CommittedAtMs: -1, Key: []byte("k"), Value: []byte("v")}
	answer := appendFetched(nil, []BatchRecord{r})
	want = []byte{0, 0, 0, 0, 0, 0, 1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 'k', 1, 'v'}
	if !bytes.Equal(answer, want) || FetchedSize(1, 1) != len(want) || FetchedSize(0, 200) != 16+1+2+200 {
		t.Fatalf("fetch answer %x (FetchedSize %d), want %x", answer, FetchedSize(1, 1), want)
	}
}

// TestBatchReader_SaysWhatIsWrong: an error names the record and what is
// wrong with it in the body's terms (a server answers it as the message
// of a 400), and an error of the body itself comes through as it is.
func TestBatchReader_SaysWhatIsWrong(t *testing.T) {
	whole := appendRecords(nil, []pair{{nil, []byte("v")}})
	bodyErr := errors.New("the body's own error")
	for _, tc := range []struct {
		name string
		body io.Reader
		want string
	}{
		{"cut inside a length", bytes.NewReader(slices.Concat(whole, []byte{0, 0x80})), "record 1: value: the body ends inside its length"},
		{"cut inside a value", bytes.NewReader(slices.Concat(whole, []byte{0, 10, 'a', 'b'})), "record 1: value: the body ends 2 bytes into its 10"},
		{"a length past 64 bits", bytes.NewReader([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}), "record 0: key: its length is not a valid uvarint"},
		{"a length over the bound", bytes.NewReader(binary.AppendUvarint(nil, maxLen+1)), "record 0: key: length 67108865 over the 67108864-byte record bound"},
		{"the body's error", io.MultiReader(bytes.NewReader(whole), failing{bodyErr}), bodyErr.Error()},
	} {
		br := NewBatchReader(tc.body, maxLen)
		var err error
		for err == nil {
			_, _, err = br.Record()
		}
		if err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := readFetched(make([]byte, 15)); err == nil || err.Error() != "record 0: the body ends inside its offset and commit time" {
		t.Errorf("a fetch answer cut inside its first record's offset: %v", err)
	}
}

// failing is a reader that fails with its error.
type failing struct{ err error }

func (r failing) Read([]byte) (int, error) { return 0, r.err }

// FuzzDecodeBatch: whatever a binary produce body holds, the reader
// refuses it or returns records that hold no more than the body did and
// encode back into a body that decodes to the same records.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(appendRecords(nil, []pair{{[]byte("k"), []byte("v")}, {nil, []byte{}}}))
	f.Add(binary.AppendUvarint(nil, 1<<40))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, body []byte) {
		recs, err := readRecords(body)
		if err != nil {
			return
		}
		held := 0
		for _, r := range recs {
			held += len(r.key) + len(r.value)
		}
		if held > len(body) {
			t.Fatalf("%d bytes of records out of a %d-byte body", held, len(body))
		}
		same := func(a, b pair) bool { return bytes.Equal(a.key, b.key) && bytes.Equal(a.value, b.value) }
		again, err := readRecords(appendRecords(nil, recs))
		if err != nil || !slices.EqualFunc(recs, again, same) {
			t.Fatalf("%d records encoded again decoded as %d: %v", len(recs), len(again), err)
		}
		packed, err := readRecordsPacked(body, true)
		if err != nil || !slices.EqualFunc(recs, packed, same) {
			t.Fatalf("%d records read packed as %d: %v", len(recs), len(packed), err)
		}
	})
}

// FuzzDecodeFetched: whatever a server answers, the reader returns an
// error or records that hold no more than the answer did and encode back
// into an answer that decodes to the same records.
func FuzzDecodeFetched(f *testing.F) {
	f.Add(appendFetched(nil, []BatchRecord{{Offset: 3, Key: []byte("k"), Value: []byte("value")}, {Offset: 4, Value: []byte{}}}))
	f.Add(appendFetched(nil, []BatchRecord{{Offset: -1}})[:17])
	f.Add(binary.AppendUvarint(make([]byte, 16), 64<<20))
	f.Fuzz(func(t *testing.T, answer []byte) {
		recs, err := readFetched(answer)
		if err != nil {
			return
		}
		held := 0
		for _, r := range recs {
			held += 16 + len(r.Key) + len(r.Value)
		}
		if held > len(answer) {
			t.Fatalf("%d bytes of records out of a %d-byte answer", held, len(answer))
		}
		again, err := readFetched(appendFetched(nil, recs))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(recs, again, func(a, b BatchRecord) bool {
			return a.Offset == b.Offset && a.CommittedAtMs == b.CommittedAtMs && bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value)
		}) {
			t.Fatalf("%+v encoded again decoded as %+v", recs, again)
		}
	})
}

// TestBatchReader_AllocatesAboutWhatTheBodyHolds: a body of a few bytes
// that claims a value of the bound fails at its end having allocated
// little (before, the whole claimed length, every time), and a whole
// value costs about twice its length, also one byte past a power of two
// (reading in fixed steps cost about five times, doubling one buffer
// three); for a produce body and for a fetch answer.
func TestBatchReader_AllocatesAboutWhatTheBodyHolds(t *testing.T) {
	cut := append(binary.AppendUvarint([]byte{0}, maxLen), "only this"...)
	var err error
	if got := testmem.Allocated(func() { _, err = readRecords(cut) }); err == nil || got > 1<<20 {
		t.Fatalf("a %d-byte body claiming a %d-byte value: %v, allocated %d bytes", len(cut), maxLen, err, got)
	}
	cut = append(binary.AppendUvarint(appendFetched(nil, []BatchRecord{{Offset: 1}})[:17], maxLen), "only this"...)
	if got := testmem.Allocated(func() { _, err = readFetched(cut) }); err == nil || got > 1<<20 {
		t.Fatalf("a %d-byte answer claiming a %d-byte value: %v, allocated %d bytes", len(cut), maxLen, err, got)
	}
	for _, size := range []int{4 << 20, 4<<20 + 1} {
		whole := appendRecords(nil, []pair{{nil, make([]byte, size)}})
		var recs []pair
		if got := testmem.Allocated(func() { recs, err = readRecords(whole) }); err != nil || len(recs) != 1 || len(recs[0].value) != size || got > 2*uint64(size)+1<<20 {
			t.Fatalf("a body of one %d-byte value: %d records, %v, allocated %d bytes", size, len(recs), err, got)
		}
		answer := appendFetched(nil, []BatchRecord{{Offset: 1, Value: make([]byte, size)}})
		var fetched []BatchRecord
		if got := testmem.Allocated(func() { fetched, err = readFetched(answer) }); err != nil || len(fetched) != 1 || len(fetched[0].Value) != size || got > 2*uint64(size)+1<<20 {
			t.Fatalf("an answer of one %d-byte value: %d records, %v, allocated %d bytes", size, len(fetched), err, got)
		}
	}
}

// TestAppendRecord_TheBytesRecordWrites: AppendRecord builds in memory
// what BatchWriter.Record writes.
func TestAppendRecord_TheBytesRecordWrites(t *testing.T) {
	recs := []pair{{[]byte("k"), []byte("value")}, {nil, bytes.Repeat([]byte{7}, 200)}, {bytes.Repeat([]byte{1}, 300), nil}}
	var got []byte
	for _, r := range recs {
		got = AppendRecord(got, r.key, r.value)
	}
	if want := appendRecords(nil, recs); !bytes.Equal(got, want) {
		t.Fatalf("AppendRecord %x, BatchWriter.Record %x", got, want)
	}
}

// TestBatchReader_PackSmallSharesBlocksNotCapacity: packed, small keys
// and values come out of shared blocks (far fewer allocations), each
// capped at its length, so appending to one never writes over the next;
// large ones are read as before.
func TestBatchReader_PackSmallSharesBlocksNotCapacity(t *testing.T) {
	var recs []pair
	for i := range 1000 {
		recs = append(recs, pair{[]byte(fmt.Sprint("key-", i)), bytes.Repeat([]byte{byte(i)}, 100)})
	}
	recs = append(recs, pair{nil, bytes.Repeat([]byte{9}, 2*packMax)})
	body := appendRecords(nil, recs)
	var plain, packed []pair
	var err error
	plainAllocs := testing.AllocsPerRun(5, func() { plain, err = readRecords(body) })
	packedAllocs := testing.AllocsPerRun(5, func() { packed, err = readRecordsPacked(body, true) })
	if err != nil || len(packed) != len(recs) || packedAllocs > plainAllocs/2 {
		t.Fatalf("%d records packed (%v): %.0f allocations, %.0f unpacked", len(packed), err, packedAllocs, plainAllocs)
	}
	for i := range recs {
		if !bytes.Equal(packed[i].key, recs[i].key) || !bytes.Equal(packed[i].value, recs[i].value) || !bytes.Equal(plain[i].value, recs[i].value) {
			t.Fatalf("record %d read packed: %q %x", i, packed[i].key, packed[i].value)
		}
	}
	_ = append(packed[0].key, "appended"...)
	if !bytes.Equal(packed[0].value, recs[0].value) || cap(packed[0].key) != len(packed[0].key) {
		t.Fatal("appending to a packed key wrote over its value")
	}
}

// BenchmarkBatchReader_Record: a produce body of 10,000 records of 100
// bytes read record by record, each field allocated or packed.
func BenchmarkBatchReader_Record(b *testing.B) {
	var recs []pair
	for i := range 10000 {
		recs = append(recs, pair{nil, bytes.Repeat([]byte{byte(i)}, 100)})
	}
	body := appendRecords(nil, recs)
	for _, pack := range []bool{false, true} {
		b.Run(fmt.Sprint("packed=", pack), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := readRecordsPacked(body, pack); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBatchReader_ATinyBodyTakesATinyBuffer: a 3-byte produce body, its
// length known or not, packed or not, is read with buffers its size, not
// the 64 KiB a large body is read in: requests too small for the
// in-flight byte budget to notice must not hold much more than it sees.
func TestBatchReader_ATinyBodyTakesATinyBuffer(t *testing.T) {
	body := AppendRecord(nil, nil, []byte("x"))
	if len(body) != 3 {
		t.Fatalf("the body is %d bytes", len(body))
	}
	for _, size := range []int64{-1, int64(len(body))} {
		for _, pack := range []bool{false, true} {
			var recs int
			var err error
			got := testmem.Allocated(func() {
				br := NewBatchReaderSize(bytes.NewReader(body), maxLen, size)
				if pack {
					br.PackSmall()
				}
				for {
					if _, _, err = br.Record(); err != nil {
						break
					}
					recs++
				}
			})
			if err != io.EOF || recs != 1 {
				t.Fatalf("size %d, pack %v: %d records, %v", size, pack, recs, err)
			}
			if got > 16<<10 {
				t.Fatalf("size %d, pack %v: reading a 3-byte body allocated %d bytes; want at most 16 KiB", size, pack, got)
			}
		}
	}
}

// TestBatchReader_GrowsWithABodyOfUnknownLength: a body of unknown length
// well past the largest buffer, read in small reads, comes out whole as
// its buffers grow, packed or not.
func TestBatchReader_GrowsWithABodyOfUnknownLength(t *testing.T) {
	var want []pair
	var body []byte
	for i := range 3000 {
		p := pair{[]byte(fmt.Sprint("k", i)), bytes.Repeat([]byte{byte(i)}, i%300)}
		want = append(want, p)
		body = AppendRecord(body, p.key, p.value)
	}
	for _, pack := range []bool{false, true} {
		br := NewBatchReader(iotest.HalfReader(bytes.NewReader(body)), maxLen)
		if pack {
			br.PackSmall()
		}
		for i := 0; ; i++ {
			key, value, err := br.Record()
			if err == io.EOF {
				if i != len(want) {
					t.Fatalf("pack %v: %d records; want %d", pack, i, len(want))
				}
				break
			}
			if err != nil {
				t.Fatalf("pack %v: record %d: %v", pack, i, err)
			}
			if !bytes.Equal(key, want[i].key) || !bytes.Equal(value, want[i].value) {
				t.Fatalf("pack %v: record %d is %q/%q", pack, i, key, value)
			}
		}
	}
}

// TestBatchReader_AnEmptyFieldIsEmptyNotNil: an empty key or value reads
// as an empty slice, never nil, whichever record it is in and packed or
// not (packed, the first record's came back nil from a block not yet
// made, the later ones empty).
func TestBatchReader_AnEmptyFieldIsEmptyNotNil(t *testing.T) {
	var body []byte
	for range 3 {
		body = AppendRecord(body, nil, nil)
	}
	for _, pack := range []bool{false, true} {
		br := NewBatchReader(bytes.NewReader(body), 1<<10)
		if pack {
			br.PackSmall()
		}
		for i := range 3 {
			key, value, err := br.Record()
			if err != nil || key == nil || value == nil || len(key)+len(value) != 0 {
				t.Fatalf("packed %v, record %d: key %#v value %#v, %v", pack, i, key, value, err)
			}
		}
	}
}
