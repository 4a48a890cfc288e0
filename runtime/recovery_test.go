package runtime

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
)

// Regressions found by a review of the metastore's and the markers'
// recovery: failed changes, purges cut short, read errors.

// TestMetastore_AFailedChangeIsTakenBackOnDisk (found by review): a
// DeleteTopic whose metastore.json write landed but whose copy write
// failed returns an error and restores the record in memory; the topic
// keeps serving and acking. A crash before the next successful metastore
// change loads metastore.json (the higher version, without the topic),
// and the startup sweep purges the directory with the records acked
// after the failed delete. Now the restored state is saved again at a
// fresh version, so the files never hold a change that failed.
func TestMetastore_AFailedChangeIsTakenBackOnDisk(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	d.Inject(sim.Fault{Op: sim.OpSync, Path: filepath.Join(dataDir, metastoreCopy+".tmp"), Nth: 1, Err: syscall.EIO})
	if err := n.DeleteTopic(bg, "orders"); err == nil {
		t.Fatal("delete succeeded; the fault did not fire")
	}
	// The delete failed: the node still serves the topic and acks.
	if _, ok, _ := n.ms.Topic(bg, "orders"); !ok {
		t.Fatal("record gone from memory after a failed delete")
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 3, 3)); err != nil {
		t.Fatalf("produce after the failed delete: %v", err)
	}
	if got := readValues(t, n, "orders", 0); len(got) != 6 {
		t.Fatalf("before the crash: %d records, want 6", len(got))
	}
	crashed := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	again := startNode(t, crashed, Config{})
	if _, ok, _ := again.ms.Topic(bg, "orders"); !ok {
		t.Errorf("after the crash the topic is gone (its delete had failed)")
	}
	if ok, _ := vfs.Exists(crashed, filepath.Join(dataDir, "topics", "orders")); !ok {
		t.Errorf("after the crash the sweep purged topics/orders: 6 acked records lost, 3 of them acked after the delete failed")
	}
}

// A transient read error on the incarnation marker during a recheck is
// taken for a deleted or replaced incarnation: the live topic's logs are
// closed through CloseAll, without the produce gates (which the design
// allows only for purges and stale incarnations).
func TestRecheck_AMarkerReadErrorNeverRetiresALiveLog(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.reg.Lookup(key("orders", 0)); !ok {
		t.Fatal("log not open")
	}
	d.Inject(sim.Fault{Op: sim.OpRead, Path: filepath.Join(dataDir, "topics", "orders", "incarnation"), Nth: 1, Err: syscall.EIO})
	// A metadata change of the live topic (the change feed), e.g. made
	// through the metastore by another node in a cluster.
	if _, err := n.ms.SetRetention(bg, "orders", Retention{Ms: 0}); err != nil {
		t.Fatal(err)
	}
	n.background.Wait()
	if _, ok := n.reg.Lookup(key("orders", 0)); !ok {
		t.Errorf("one EIO reading the marker retired the live log without its produce gate")
	}
}

// TestPurge_NeverLeavesDeletedDataUnderTheLiveName: a purge moves the
// deleted incarnation's directory out of the topic's name, durably,
// before it removes anything, so at every crash point of a delete the
// directory is either whole under the live name (its markers name the
// deleted incarnation, and a recreate quarantines it) or under the stale
// name: a recreate never serves its records (found by review: RemoveAll
// unlinks in directory order, and one cut after the markers left the data
// under the live name for a recreate to adopt).
func TestPurge_NeverLeavesDeletedDataUnderTheLiveName(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	deleted, _, _ := n.CreateTopic(bg, "orders", 1, Retention{})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 4)); err != nil {
		t.Fatal(err)
	}
	explore := crashtest.NewExplorer(d, func() struct{} { return struct{}{} })
	explore.Run(func() {
		if err := n.DeleteTopic(bg, "orders"); err != nil {
			t.Fatal(err)
		}
	})
	recreated := 0
	for _, img := range explore.Images() {
		again := startNode(t, img.Disk, Config{})
		rec, _, err := again.CreateTopic(bg, "orders", 1, Retention{})
		if err != nil {
			t.Fatalf("%s: recreate: %v", img.Label, err)
		}
		if rec.Incarnation == deleted.Incarnation {
			continue // the delete had not reached the metastore: nothing was deleted
		}
		recreated++
		if got := readValues(t, again, "orders", 0); len(got) != 0 {
			t.Fatalf("%s: the recreated topic serves %d records of the deleted incarnation", img.Label, len(got))
		}
	}
	if recreated < 5 {
		t.Fatalf("only %d crash images after the delete's record change", recreated)
	}
}

// TestMetastore_AFileFailingReadsLoadsTheCopy: metastore.json failing
// every read (docs/durability.md row 9's sticky EIO) no longer refuses the start:
// the copy, written after it, holds every change that returned (found by
// review).
func TestMetastore_AFileFailingReadsLoadsTheCopy(t *testing.T) {
	d := newTestDisk(t, 1)
	metastoreWithTopic(t, d, 1, 0)
	d.Inject(sim.Fault{Op: sim.OpRead, Path: filepath.Join(dataDir, metastoreFile), Err: syscall.EIO})
	if _, err := OpenLocalMetastore(d, dataDir); err != nil {
		t.Errorf("a good copy, and the start is refused: %v", err)
	}
}

// Found by a third review.

// TestPurge_AMarkerReadErrorNeverTakesTheLiveDirectory: a late purge of a
// deleted incarnation (it lost the race with a recreate that opened and
// acked into the new directory) meets one EIO reading the marker; the
// copy names the live incarnation, and the purge leaves the directory
// (found by review: it took the read error for the deleted incarnation's
// marker and removed the live directory).
func TestPurge_AMarkerReadErrorNeverTakesTheLiveDirectory(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	old, _, _ := n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 2))
	n.ms.DeleteTopic(bg, "orders")
	n.ms.CreateTopic(bg, "orders", 1, Retention{})
	n.background.Wait()
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 10, 3)); err != nil {
		t.Fatal(err)
	}
	d.Inject(sim.Fault{Op: sim.OpRead, Path: filepath.Join(dataDir, "topics", "orders", "incarnation"), Nth: 1, Err: syscall.EIO})
	err := n.purge(old)
	if got := readValues(t, n, "orders", 0); len(got) != 3 {
		t.Fatalf("purge of the deleted incarnation (err %v) took the live one's acked records: %d left", err, len(got))
	}
}

// TestMetastore_BrokenRefusesProduces: one sticky fault (the data
// directory's fsync failing) fails both the delete's save and the save
// that takes it back: the files may hold the delete while memory does
// not, and a power loss keeping the first rename would apply it. The node
// refuses produces from then on rather than ack records that delete
// would take (found by review: it kept acking them).
func TestMetastore_BrokenRefusesProduces(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	d.Inject(sim.Fault{Op: sim.OpSyncDir, Path: dataDir, Nth: 1, Sticky: true, Err: syscall.EIO})
	if err := n.DeleteTopic(bg, "orders"); err == nil {
		t.Fatal("delete succeeded")
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 3, 3)); !errors.Is(err, ErrMetastoreBroken) {
		t.Fatalf("produce after the failed delete that could not be taken back: %v, want ErrMetastoreBroken", err)
	}
}

// TestMetastore_BrokenErrorStaysBounded: once broken, a refused change
// writes nothing and returns the same error (found by review: each one
// wrapped the last twice, doubling it).
func TestMetastore_BrokenErrorStaysBounded(t *testing.T) {
	d := newTestDisk(t, 1)
	ms := metastoreWithTopic(t, d, 1, 0)
	d.Inject(sim.Fault{Op: sim.OpSyncDir, Path: dataDir, Nth: 1, Sticky: true, Err: syscall.EIO})
	var sizes []int
	for i := 0; i < 12; i++ {
		_, err := ms.SetRetention(bg, "orders", Retention{Ms: int64(i + 1)})
		sizes = append(sizes, len(err.Error()))
	}
	if sizes[len(sizes)-1] > 4*sizes[1] {
		t.Fatalf("the refusal's message grows without bound: %v bytes", sizes)
	}
}
