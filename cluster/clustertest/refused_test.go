package clustertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"go.uber.org/zap"
)

// TestRefusedTopicRecord_LeavesTheTopicsDataInPlace: a topic record the
// replica refuses (damage, or a writer that is not a node) takes the
// topic out of service on the node, never off its disk. The orphan
// sweep, which purges a topic directory no record names once etcd
// confirms its incarnation gone, keeps it: etcd holds a record under the
// name, only an unreadable one. Once the record is written back the node
// serves every record it had acknowledged.
func TestRefusedTopicRecord_LeavesTheTopicsDataInPlace(t *testing.T) {
	te := startEtcd(t)
	cli := te.client()
	for i, damage := range []struct {
		name   string
		damage func(t *testing.T, record []byte) []byte
	}{
		{"not JSON", func(*testing.T, []byte) []byte { return []byte("{") }},
		{"partitions out of range", func(t *testing.T, record []byte) []byte {
			var fields map[string]any
			if err := json.Unmarshal(record, &fields); err != nil {
				t.Fatal(err)
			}
			fields["partitions"] = 1 << 40
			b, err := json.Marshal(fields)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			topic := fmt.Sprintf("orders-%d", i)
			m := openMetastore(t, te, "a")
			heard := subscribe(m)
			dataDir := t.TempDir()
			n, err := runtime.New(runtime.Config{DataDir: dataDir, Metastore: m, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			if err := n.Start(bg); err != nil {
				t.Fatal(err)
			}
			if _, _, err := n.CreateTopic(bg, topic, 1, runtime.Retention{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Put(bg, "/narad/assign/"+topic+"/0", "a"); err != nil {
				t.Fatal(err)
			}
			heard.waitFor(t, "the assignment", func() bool { ok, _ := m.Assigned(bg, topic, 0); return ok })
			records := make([]partition.Record, 10)
			for j := range records {
				records[j].Value = fmt.Appendf(nil, "record %d", j)
			}
			if _, err := n.Produce(bg, topic, 0, records); err != nil {
				t.Fatal(err)
			}

			key := "/narad/topics/" + topic
			got, err := cli.Get(bg, key)
			if err != nil || got.Count != 1 {
				t.Fatalf("the topic's record in etcd: %+v, %v", got, err)
			}
			record := got.Kvs[0].Value
			if _, err := cli.Put(bg, key, string(damage.damage(t, record))); err != nil {
				t.Fatal(err)
			}
			heard.waitFor(t, "the damaged record refused", func() bool { _, ok, _ := m.Topic(bg, topic); return !ok })
			waitCaughtUp(t, m, true) // or the sweep would not judge the directory at all
			if _, err := n.Produce(bg, topic, 0, records[:1]); !errors.Is(err, runtime.ErrTopicNotFound) {
				t.Fatalf("a produce to the topic of a refused record: %v, want ErrTopicNotFound", err)
			}
			if removed := n.SweepQuarantine(bg); removed != 0 {
				t.Fatalf("the orphan sweep removed %d directories while etcd holds the topic's record", removed)
			}
			if _, err := os.Stat(filepath.Join(dataDir, "topics", topic)); err != nil {
				t.Fatalf("the topic's directory: %v", err)
			}

			if _, err := cli.Put(bg, key, string(record)); err != nil { // the operator's repair
				t.Fatal(err)
			}
			heard.waitFor(t, "the repaired record", func() bool { _, ok, _ := m.Topic(bg, topic); return ok })
			res, err := n.Read(bg, topic, 0, 0, 100, 1<<20)
			if err != nil || len(res.Records) != len(records) {
				t.Fatalf("read after the repair: %d records, %v; want %d", len(res.Records), err, len(records))
			}
			for j, r := range res.Records {
				if string(r.Value) != string(records[j].Value) {
					t.Fatalf("record %d after the repair: %q, want %q", j, r.Value, records[j].Value)
				}
			}
		})
	}
}
