package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
)

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
		out := api.ProduceRequest{Records: []api.ProduceRecord{}}
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
			rec := api.ProduceRecord{Value: text(r.Value)}
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
