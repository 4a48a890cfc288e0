package cluster

import (
	"encoding/json"
	"testing"

	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
)

// FuzzDecodeTopic: whatever a topic key holds, decodeTopic either refuses
// it or returns a record a node could serve (its own name, partitions a
// directory name holds, no negative retention), which reads back the same
// once written again.
func FuzzDecodeTopic(f *testing.F) {
	f.Add("orders", []byte(`{"name":"orders","incarnation":"","partitions":3,"retention_ms":60000,"version":0}`))
	f.Add("orders", []byte(`{"name":"orders","partitions":1099511627776}`))
	f.Add("orders", []byte(`{"name":"orders","partitions":2,"retention_bytes":-1}`))
	f.Add("o", []byte(`{"name":"p","partitions":1}`))
	f.Fuzz(func(t *testing.T, name string, value []byte) {
		rec, err := decodeTopic(name, value, 7)
		if err != nil {
			return
		}
		if rec.Name != name || rec.Partitions < 1 || rec.Partitions > wire.MaxPartitions || rec.RetentionMs < 0 || rec.RetentionBytes < 0 || rec.Version != 7 {
			t.Fatalf("decodeTopic(%q, %q) took %+v", name, value, rec)
		}
		again, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeTopic(name, again, 7)
		if err != nil || back != rec {
			t.Fatalf("%+v written again read back as %+v, %v", rec, back, err)
		}
	})
}

// TestDecodeTopic_RefusesWhatNoNodeWrites: a record whose partitions a
// directory name cannot hold, or whose retention is negative, is
// refused; the assigner would otherwise walk 2^40 partitions.
func TestDecodeTopic_RefusesWhatNoNodeWrites(t *testing.T) {
	for _, rec := range []runtime.TopicRecord{
		{Name: "orders", Partitions: 0},
		{Name: "orders", Partitions: wire.MaxPartitions + 1},
		{Name: "orders", Partitions: 1 << 40},
		{Name: "orders", Partitions: 1, RetentionMs: -1},
		{Name: "orders", Partitions: 1, RetentionBytes: -1},
		{Name: "orders", Partitions: 1, RetentionMs: runtime.MaxRetentionMs + 1},
		{Name: "orders", Partitions: 1, RetentionMs: 18446744073710}, // a duration of 448 us once wrapped
	} {
		b, _ := json.Marshal(rec)
		if _, err := decodeTopic("orders", b, 1); err == nil {
			t.Errorf("took %s", b)
		}
	}
	b, _ := json.Marshal(runtime.TopicRecord{Name: "orders", Partitions: wire.MaxPartitions, RetentionMs: runtime.MaxRetentionMs, RetentionBytes: 1})
	if _, err := decodeTopic("orders", b, 1); err != nil {
		t.Errorf("refused the widest topic: %v", err)
	}
}
