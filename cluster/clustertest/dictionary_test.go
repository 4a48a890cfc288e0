package clustertest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/wire"
)

// TestCluster_AMovedPartitionTakesItsTopicsDictionary: a partition whose
// frames its owner compressed with a dictionary trained there moves to
// another node with the dictionary file, and the new owner serves every
// record.
func TestCluster_AMovedPartitionTakesItsTopicsDictionary(t *testing.T) {
	te := startEtcd(t)
	nodes := map[string]*node{}
	for _, id := range []string{"a", "b"} {
		nodes[id] = startNode(t, te, id, filepath.Join(t.TempDir(), id))
	}
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	if _, _, err := nodes["a"].client().CreateTopic(bg, "orders", 1, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	from := owners(t, watch, heard, "orders", 1)[0]
	to := "a"
	if from == "a" {
		to = "b"
	}
	value := func(i int) string {
		return fmt.Sprintf(`{"order_id":%d,"status":"paid","currency":"EUR","total_cents":%d}`, i, 1000+i%97)
	}
	owner := nodes[from].client()
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := owner.Produce(bg, "orders", 0, []client.Record{{Value: []byte(value(i))}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 100)
	d, err := owner.TrainDictionary(bg, "orders", client.DictionaryTraining{Samples: 100, MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	produce(100, 100)

	if _, err := owner.MovePartition(bg, "orders", 0, to); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "the move to complete", func() bool {
		o, _ := watch.Owner("orders", 0)
		return o == to && len(watch.Moves()) == 0
	})
	name, _ := wire.DictionaryFileName(d.ID)
	if _, err := os.Stat(filepath.Join(nodes[to].dataDir, wire.TopicsDirName, "orders", name)); err != nil {
		t.Fatalf("the dictionary file on the new owner: %v", err)
	}
	newOwner := nodes[to].client()
	var got []client.FetchedRecord
	for len(got) < 200 {
		res, err := newOwner.Fetch(bg, "orders", 0, int64(len(got)), client.FetchOptions{MaxRecords: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) == 0 {
			break
		}
		got = append(got, res.Records...)
	}
	if len(got) != 200 {
		t.Fatalf("the new owner serves %d records, want 200", len(got))
	}
	for i, r := range got {
		if string(r.Value) != value(i) {
			t.Fatalf("record %d: %q", i, r.Value)
		}
	}
}
