package client

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/narad-io/storage/internal/testmem"
)

// appendFetched is the binary fetch encoding decodeFetched reads.
func appendFetched(b []byte, recs []FetchedRecord) []byte {
	for _, r := range recs {
		b = binary.BigEndian.AppendUint64(b, uint64(r.Offset))
		b = binary.BigEndian.AppendUint64(b, uint64(r.CommittedAt.UnixMilli()))
		b = binary.AppendUvarint(b, uint64(len(r.Key)))
		b = append(b, r.Key...)
		b = binary.AppendUvarint(b, uint64(len(r.Value)))
		b = append(b, r.Value...)
	}
	return b
}

func decodeFetchedBytes(b []byte) ([]FetchedRecord, error) {
	return decodeFetched(bufio.NewReader(bytes.NewReader(b)))
}

// FuzzDecodeFetched: whatever a server answers, decodeFetched returns an
// error or records that hold no more than the answer did and encode back
// into an answer that decodes to the same records.
func FuzzDecodeFetched(f *testing.F) {
	f.Add(appendFetched(nil, []FetchedRecord{{Offset: 3, Key: []byte("k"), Value: []byte("value")}, {Offset: 4, Value: []byte{}}}))
	f.Add(appendFetched(nil, []FetchedRecord{{Offset: -1}})[:17])
	f.Add(binary.AppendUvarint(make([]byte, 16), 64<<20))
	f.Fuzz(func(t *testing.T, answer []byte) {
		recs, err := decodeFetchedBytes(answer)
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
		again, err := decodeFetchedBytes(appendFetched(nil, recs))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(recs, again, func(a, b FetchedRecord) bool {
			return a.Offset == b.Offset && a.CommittedAt.Equal(b.CommittedAt) && bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value)
		}) {
			t.Fatalf("%+v encoded again decoded as %+v", recs, again)
		}
	})
}

// TestDecodeFetched_AllocatesAboutWhatTheAnswerHolds: an answer of a few
// bytes that claims a 64 MiB value fails at its end having allocated
// little (before, the whole claimed length, every time), and a whole
// value costs about twice its length, also one byte past a power of two
// (reading in fixed steps cost about five times, doubling one buffer
// three).
func TestDecodeFetched_AllocatesAboutWhatTheAnswerHolds(t *testing.T) {
	cut := binary.AppendUvarint(appendFetched(nil, []FetchedRecord{{Offset: 1}})[:17], maxChunk)
	cut = append(cut, "only this"...)
	var err error
	if got := testmem.Allocated(func() { _, err = decodeFetchedBytes(cut) }); err == nil || got > 1<<20 {
		t.Fatalf("a %d-byte answer claiming a %d-byte value: %v, allocated %d bytes", len(cut), maxChunk, err, got)
	}
	for _, size := range []int{4 << 20, 4<<20 + 1} {
		whole := appendFetched(nil, []FetchedRecord{{Offset: 1, Value: make([]byte, size)}})
		var recs []FetchedRecord
		if got := testmem.Allocated(func() { recs, err = decodeFetchedBytes(whole) }); err != nil || len(recs) != 1 || len(recs[0].Value) != size || got > 2*uint64(size)+1<<20 {
			t.Fatalf("an answer of one %d-byte value: %d records, %v, allocated %d bytes", size, len(recs), err, got)
		}
	}
}
