package clustertest

import (
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/client"
)

// TestCluster_AMoveWaitsForTheOldOwnersViewOfIt: each node follows etcd
// on its own watch, so a move's new owner may ask the old owner for the
// move before the old owner's replica holds it. The old owner then
// catches up with etcd and answers, and the move completes at its first
// try, nothing logged at error (found in a trial: the old owner answered
// 404 move_not_found, the new owner logged the failure at error and
// tried again after the mover's pause, seconds later). The old owner's
// lag is made by a proxy holding what etcd sends it.
func TestCluster_AMoveWaitsForTheOldOwnersViewOfIt(t *testing.T) {
	te := startEtcd(t)
	byID, proxies := map[string]*node{}, map[string]*proxy{}
	var nodes []*node
	for _, id := range []string{"a", "b"} {
		proxies[id] = newProxyAt(t, te, id+".sock")
		byID[id] = startNodeThrough(t, proxies[id], id, filepath.Join(t.TempDir(), id))
		nodes = append(nodes, byID[id])
	}
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	rec, _, err := nodes[0].client().CreateTopic(bg, "orders", 1, client.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	from := byID[owners(t, watch, heard, "orders", 1)[0]]
	to := byID["a"]
	if from == to {
		to = byID["b"]
	}
	produceEach(t, nodes, "orders", 1, 0, 5)
	to.waitApplied("orders", rec.Incarnation, 1) // it knows where to pull from

	proxies[from.id].hold() // the old owner hears nothing more from etcd
	if _, err := to.client().MovePartition(bg, "orders", 0, to.id); err != nil {
		t.Fatal(err)
	}
	if !from.waitLog("a move not in this node's replica yet") {
		t.Fatalf("the old owner, asked for a move its replica lacks, never looked for it in etcd; the new owner's log:\n%s", to.log())
	}
	proxies[from.id].release()
	heard.waitFor(t, "the move to complete", func() bool {
		o, _ := watch.Owner("orders", 0)
		return o == to.id && len(watch.Moves()) == 0
	})
	if !to.waitLog("partition moved here") {
		t.Fatal("the new owner never said it moved the partition")
	}
	for _, d := range nodes {
		if n := d.logCount(`"level":"error"`); n > 0 {
			t.Fatalf("node %s logged %d errors:\n%s", d.id, n, d.log())
		}
	}
	fetchAll(t, to, "orders", 0, 5)
}
