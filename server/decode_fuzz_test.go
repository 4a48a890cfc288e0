package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/narad-io/storage/internal/testmem"
	"github.com/narad-io/storage/partition"
)

// appendBatch is the binary produce body decodeBatch reads.
func appendBatch(b []byte, recs []partition.Record) []byte {
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(len(r.Key)))
		b = append(b, r.Key...)
		b = binary.AppendUvarint(b, uint64(len(r.Value)))
		b = append(b, r.Value...)
	}
	return b
}

func sameRecords(a, b []partition.Record) bool {
	return slices.EqualFunc(a, b, func(x, y partition.Record) bool {
		return bytes.Equal(x.Key, y.Key) && bytes.Equal(x.Value, y.Value)
	})
}

func heldBytes(recs []partition.Record) int {
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value)
	}
	return n
}

// FuzzDecodeBatch: whatever a binary produce body holds, decodeBatch
// refuses it or returns records that hold no more than the body did and
// encode back into a body that decodes to the same records.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(appendBatch(nil, []partition.Record{{Key: []byte("k"), Value: []byte("v")}, {Value: []byte{}}}))
	f.Add(binary.AppendUvarint(nil, 1<<40))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, body []byte) {
		recs, err := decodeBatch(bytes.NewReader(body))
		if err != nil {
			return
		}
		if held := heldBytes(recs); held > len(body) {
			t.Fatalf("%d bytes of records out of a %d-byte body", held, len(body))
		}
		again, err := decodeBatch(bytes.NewReader(appendBatch(nil, recs)))
		if err != nil || !sameRecords(recs, again) {
			t.Fatalf("%d records encoded again decoded as %d: %v", len(recs), len(again), err)
		}
	})
}

// TestDecodeBatch_AllocatesAboutWhatTheBodyHolds: a body of a few bytes
// that claims a value of the record bound fails at its end having
// allocated little, and a whole value costs about twice its length, also
// one byte past a power of two (reading in fixed steps cost about five
// times, doubling one buffer three).
func TestDecodeBatch_AllocatesAboutWhatTheBodyHolds(t *testing.T) {
	cut := append(binary.AppendUvarint([]byte{0}, 4<<20), "only this"...)
	var err error
	if got := testmem.Allocated(func() { _, err = decodeBatch(bytes.NewReader(cut)) }); err == nil || got > 1<<20 {
		t.Fatalf("a %d-byte body claiming a 4 MiB value: %v, allocated %d bytes", len(cut), err, got)
	}
	for _, size := range []int{4 << 20, 4<<20 + 1} {
		whole := appendBatch(nil, []partition.Record{{Value: make([]byte, size)}})
		var recs []partition.Record
		if got := testmem.Allocated(func() { recs, err = decodeBatch(bytes.NewReader(whole)) }); err != nil || len(recs) != 1 || len(recs[0].Value) != size || got > 2*uint64(size)+1<<20 {
			t.Fatalf("a body of one %d-byte value: %d records, %v, allocated %d bytes", size, len(recs), err, got)
		}
	}
}

// FuzzDecodeJSONRecords: whatever a JSON produce body holds, decoded as
// text or as base64, decodeJSONRecords refuses it or returns records
// that hold no more than the body did (text that is valid UTF-8, when
// not base64) and that the same body written by a client decodes to.
func FuzzDecodeJSONRecords(f *testing.F) {
	f.Add([]byte(`{"records":[{"key":"k","value":"v"},{"value":""}]}`), false)
	f.Add([]byte(`{"records":[{"key":null,"value":"QUJD"}]}`), true)
	f.Add([]byte(`{"records":[{"value":"\ud800"}]}`), false)
	f.Add([]byte(`{"records":[{"value":"\ufffd\\ufffd"}]}`), false)
	f.Fuzz(func(t *testing.T, body []byte, b64 bool) {
		recs, err := decodeJSONRecords(bytes.NewReader(body), b64)
		if err != nil {
			return
		}
		if held := heldBytes(recs); held > len(body) {
			t.Fatalf("%d bytes of records out of a %d-byte body", held, len(body))
		}
		type record struct {
			Key   *string `json:"key,omitempty"`
			Value string  `json:"value"`
		}
		out := struct {
			Records []record `json:"records"`
		}{Records: []record{}}
		for _, r := range recs {
			if !b64 && (!utf8.Valid(r.Key) || !utf8.Valid(r.Value)) {
				t.Fatalf("took text that is not UTF-8: %q", body)
			}
			text := func(b []byte) string {
				if b64 {
					return base64.StdEncoding.EncodeToString(b)
				}
				return string(b)
			}
			rec := record{Value: text(r.Value)}
			if r.Key != nil {
				k := text(r.Key)
				rec.Key = &k
			}
			out.Records = append(out.Records, rec)
		}
		again, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeJSONRecords(bytes.NewReader(again), b64)
		if err != nil || !sameRecords(recs, back) {
			t.Fatalf("%q decoded as %d records; written again as %q, decoded as %d: %v", body, len(recs), again, len(back), err)
		}
	})
}
