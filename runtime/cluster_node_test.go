package runtime

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The tests of this file are a cluster's node: a metastore that assigns
// some partitions to other nodes (testMetastore's foreign ones).

// foreignOwner wraps the local metastore so that the given partitions are
// another node's; setup runs on the local metastore first.
func foreignOwner(setup func(*LocalMetastore), foreign ...supervisor.Key) func(*LocalMetastore) Metastore {
	return func(local *LocalMetastore) Metastore {
		if setup != nil {
			setup(local)
		}
		ms := &testMetastore{LocalMetastore: local, foreign: map[supervisor.Key]bool{}}
		for _, k := range foreign {
			ms.foreign[k] = true
		}
		return ms
	}
}

// TestStart_OpensOnlyWhatTheNodeOwns: startup opens the partitions
// assigned to this node, leaves those of other nodes alone (no directory
// made for them) and warns about none of them.
func TestStart_OpensOnlyWhatTheNodeOwns(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	create := func(local *LocalMetastore) {
		if _, _, err := local.CreateTopic(bg, "orders", 4, Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	n := startNodeWith(t, nil, Config{Logger: zap.New(core)}, foreignOwner(create, key("orders", 1), key("orders", 3)))
	refs, err := n.Partitions(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[0].Partition != 0 || refs[1].Partition != 2 || !refs[0].Open || !refs[1].Open {
		t.Fatalf("partitions of this node after start: %+v; want 0 and 2, open", refs)
	}
	for _, p := range []int{1, 3} {
		dir, _ := wire.PartitionDirName(p)
		if ok, _ := vfs.Exists(n.disk, filepath.Join(dataDir, wire.TopicsDirName, "orders", dir)); ok {
			t.Fatalf("startup made a directory for partition %d, another node's", p)
		}
		if _, err := n.Produce(bg, "orders", p, recs("orders", p, 0, 1)); err == nil {
			t.Fatalf("partition %d, another node's, took a produce", p)
		}
	}
	if logs.Len() != 0 {
		t.Fatalf("startup warned: %v", logs.All())
	}
}

// TestSweep_QuarantinesAReplacedIncarnationThisNodeDoesNotServe: a topic
// deleted and made again while this node was down, with every partition
// of the new incarnation given to other nodes: no open here meets the
// leftover, so the startup sweep quarantines it (never serving or
// deleting it at once), and the next sweep reclaims it, the metastore
// confirming its incarnation gone.
func TestSweep_QuarantinesAReplacedIncarnationThisNodeDoesNotServe(t *testing.T) {
	d := newTestDisk(t, 1)
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{DataDir: dataDir, FS: d, Testing: checkLockOrder, Metastore: ms})
	if err != nil {
		t.Fatal(err)
	}
	old, _, err := n.CreateTopic(bg, "orders", 2, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	var fresh TopicRecord
	recreate := func(local *LocalMetastore) { // by another node, while this one was down
		if err := local.DeleteTopic(bg, "orders"); err != nil {
			t.Fatal(err)
		}
		if fresh, _, err = local.CreateTopic(bg, "orders", 2, Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	r := startNodeWith(t, d, Config{}, foreignOwner(recreate, key("orders", 0), key("orders", 1)))
	topicDir := filepath.Join(dataDir, wire.TopicsDirName, "orders")
	stale := filepath.Join(dataDir, wire.TopicsDirName, "orders.stale-"+string(old.Incarnation))
	if ok, _ := vfs.Exists(d, stale); !ok {
		t.Fatalf("the deleted incarnation %s's directory was not quarantined (the new one is %s)", old.Incarnation, fresh.Incarnation)
	}
	if ok, _ := vfs.Exists(d, topicDir); ok {
		t.Fatal("a topic directory is left where this node owns no partition")
	}
	if removed := r.SweepQuarantine(bg); removed != 1 {
		t.Fatalf("the next sweep reclaimed %d directories, want the quarantined one", removed)
	}
	if ok, _ := vfs.Exists(d, stale); ok {
		t.Fatal("the quarantined directory outlived the sweep")
	}
}

// TestTopicCalls_CoverOnlyThePartitionsTheNodeOwns: a cursor's create,
// lookup and delete and a consume of any partition reach the partitions
// this node owns and never touch another node's (no directory made, no
// error for them).
func TestTopicCalls_CoverOnlyThePartitionsTheNodeOwns(t *testing.T) {
	create := func(local *LocalMetastore) {
		if _, _, err := local.CreateTopic(bg, "orders", 4, Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	n := startNodeWith(t, nil, Config{}, foreignOwner(create, key("orders", 1), key("orders", 3)))
	for _, p := range []int{0, 2} {
		if _, err := n.Produce(bg, "orders", p, recs("orders", p, 0, 5)); err != nil {
			t.Fatal(err)
		}
	}
	if created, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil || !created {
		t.Fatalf("create a cursor: %v, %v", created, err)
	}
	positions, err := n.Cursor(bg, "orders", "audit")
	if err != nil || len(positions) != 2 || positions[0].Partition != 0 || positions[1].Partition != 2 {
		t.Fatalf("the cursor's partitions: %+v, %v; want 0 and 2", positions, err)
	}
	from := map[int]int{}
	for range 4 {
		leased, err := n.Consume(bg, "orders", ConsumeOptions{Partition: AnyPartition, MaxRecords: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range leased {
			from[r.Partition]++
		}
	}
	if len(from) != 2 || from[0] != 5 || from[2] != 5 {
		t.Fatalf("records leased by partition: %v; want 5 from each of 0 and 2", from)
	}
	if err := n.DeleteCursor(bg, "orders", "audit"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{1, 3} {
		dir, _ := wire.PartitionDirName(p)
		if ok, _ := vfs.Exists(n.disk, filepath.Join(dataDir, wire.TopicsDirName, "orders", dir)); ok {
			t.Fatalf("a directory was made for partition %d, another node's", p)
		}
	}
}

// unreachableGone is a cluster's metastore whose leader cannot be reached:
// IncarnationGone waits until its context ends.
type unreachableGone struct {
	*LocalMetastore
	entered chan struct{}
	ended   chan error
}

func (m *unreachableGone) IncarnationGone(ctx context.Context, _ string, _ wire.IncarnationID) (bool, error) {
	select {
	case m.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	select {
	case m.ended <- ctx.Err():
	default:
	}
	return false, ctx.Err()
}

// TestClose_EndsARecheckWaitingOnTheMetastore: a recheck that asks the
// leader about a deleted incarnation while the leader is unreachable is
// ended by Close, never holding the node's close up (found by review: a
// daemon stopped while etcd was away waited for ever).
func TestClose_EndsARecheckWaitingOnTheMetastore(t *testing.T) {
	ms := &unreachableGone{entered: make(chan struct{}, 1), ended: make(chan error, 1)}
	d := newTestDisk(t, 1)
	local, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	ms.LocalMetastore = local
	n, err := New(Config{DataDir: dataDir, FS: d, Testing: checkLockOrder, Metastore: ms})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := local.DeleteTopic(bg, "orders"); err != nil { // another node's delete
		t.Fatal(err)
	}
	<-ms.entered
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-ms.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the recheck's wait ended with %v, want its context cancelled", err)
	}
}

// TestDropPartition_RemovesACopyTheNodeNoLongerOwns: a move's old owner
// drops its copy once another node owns the partition: its log closed,
// its directory gone, at every crash point either whole or gone (a
// crash mid-removal leaves the set-aside directory, removed at the next
// start, never a partial one under the live name); a partition the node
// owns is refused.
func TestDropPartition_RemovesACopyTheNodeNoLongerOwns(t *testing.T) {
	var ms *testMetastore
	create := func(local *LocalMetastore) {
		if _, _, err := local.CreateTopic(bg, "orders", 2, Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	n := startNodeWith(t, nil, Config{SegmentMaxBytes: 1 << 10}, func(local *LocalMetastore) Metastore {
		ms = foreignOwner(create)(local).(*testMetastore)
		return ms
	})
	for p := range 2 {
		if _, err := n.Produce(bg, "orders", p, recs("orders", p, 0, 40)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.DropPartition(bg, "orders", 0); !errors.Is(err, ErrAssigned) {
		t.Fatalf("dropping an owned partition: %v, want ErrAssigned", err)
	}
	ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true }) // moved away
	explore := crashtest.NewExplorer(n.disk, func() struct{} { return struct{}{} })
	explore.Run(func() {
		if err := n.DropPartition(bg, "orders", 0); err != nil {
			t.Fatal(err)
		}
	})
	if _, open := n.reg.Lookup(key("orders", 0)); open {
		t.Fatal("the dropped partition's log is open")
	}
	final := partitionPath("orders", 0)
	if ok, _ := vfs.Exists(n.disk, final); ok {
		t.Fatal("the dropped partition's directory is there")
	}
	if got := readValues(t, n, "orders", 1); len(got) != 40 {
		t.Fatalf("the other partition serves %d records, want 40", len(got))
	}
	for _, img := range explore.Images() {
		whole, _ := vfs.Exists(img.Disk, final) // before a start, whose node owns the partition and would make it anew
		r := startImage(t, img.Disk)
		assertNoInstallLeftovers(t, r.disk, img.Label)
		if whole {
			if got := readValues(t, r, "orders", 0); len(got) != 40 {
				t.Fatalf("%s: the partition's directory is there with %d records, not its 40", img.Label, len(got))
			}
		}
		r.Close()
	}
}

// TestFreezePartition_ClosesALogTheNodeNoLongerOwns: a move's old owner,
// once the metastore no longer assigns it the partition, closes the log
// (which an open before the freeze kept serving: found by review), and no
// produce reaches the partition after; a partition still assigned is
// refused and its log left open. The listing then carries the queue
// consumer's progress, written out at the close.
func TestFreezePartition_ClosesALogTheNodeNoLongerOwns(t *testing.T) {
	var ms *testMetastore
	create := func(local *LocalMetastore) {
		if _, _, err := local.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	n := startNodeWith(t, nil, Config{}, func(local *LocalMetastore) Metastore {
		ms = foreignOwner(create)(local).(*testMetastore)
		return ms
	})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Ack(bg, "orders", 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := n.FreezePartition(bg, "orders", 0); !errors.Is(err, ErrAssigned) {
		t.Fatalf("freezing an owned partition: %v, want ErrAssigned", err)
	}
	if _, open := n.reg.Lookup(key("orders", 0)); !open {
		t.Fatal("a refused freeze closed the log")
	}
	ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true }) // the move frozen
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 5, 1)); err != nil {
		t.Fatalf("fixture: the open log no longer serves before the freeze: %v", err)
	}
	if err := n.FreezePartition(bg, "orders", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 6, 1)); !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("a produce after the freeze: %v, want ErrNotAssigned", err)
	}
	l, err := n.TransferListing(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.HighWatermark != 6 || !l.Known || len(l.Consumer) != 2 {
		t.Fatalf("the final listing: %+v; want high watermark 6 and both consumer files", l)
	}
}

// closedTopicOfThree makes topic orders, one partition, with 3 records,
// its log closed (the sweep's subject), and returns its record.
func closedTopicOfThree(t *testing.T, n *testNode) TopicRecord {
	t.Helper()
	rec, _, err := n.CreateTopic(bg, "orders", 1, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestSweep_AMarkerFlippedIntoAnotherIDIsLeftForTheOpenToRepair: a bit
// flip that turns the marker into another valid id, its copy intact, is
// the live incarnation's directory: the sweep leaves it, the next open
// repairs the marker from the copy, and the records stay served (found by
// the fault campaign: the sweep quarantined it and the partition came
// back empty).
func TestSweep_AMarkerFlippedIntoAnotherIDIsLeftForTheOpenToRepair(t *testing.T) {
	n := startNode(t, nil, Config{})
	rec := closedTopicOfThree(t, n)
	flipped := []byte(string(rec.Incarnation) + "\n")
	flipped[0] ^= 0x01 // '0'..'9' and 'a'..'f' stay hex under a low-bit flip, but for '9' and 'f'
	if _, err := wire.ParseIncarnationID(string(flipped[:16])); err != nil {
		flipped[0] = '0'
		if string(flipped[:16]) == string(rec.Incarnation) {
			flipped[0] = '1'
		}
	}
	marker := filepath.Join(dataDir, wire.TopicsDirName, "orders", wire.IncarnationFileName)
	if err := n.disk.Damage(marker, 0, flipped); err != nil {
		t.Fatal(err)
	}
	if removed := n.SweepQuarantine(bg); removed != 0 {
		t.Fatalf("the sweep removed or moved %d directories", removed)
	}
	if got := readValues(t, n, "orders", 0); len(got) != 3 {
		t.Fatalf("the partition serves %d records, want its 3", len(got))
	}
	if b, _ := n.disk.Contents(marker); string(b) != string(rec.Incarnation)+"\n" {
		t.Fatalf("the open did not repair the marker: %q", b)
	}
}

// TestSweep_AMarkerFailingReadsDecidesNothing: the marker failing every
// read and its copy damaged into another valid id is what the open path
// refuses to judge (an I/O error is never taken for another incarnation
// unless the other file vouches), and so is it for the sweep: it leaves
// the directory, and once the marker reads again the open repairs the
// copy and serves the records (found by review: the sweep quarantined
// it).
func TestSweep_AMarkerFailingReadsDecidesNothing(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	rec := closedTopicOfThree(t, n)
	other := "0123456789abcdef"
	if other == string(rec.Incarnation) {
		other = "fedcba9876543210"
	}
	topicDir := filepath.Join(dataDir, wire.TopicsDirName, "orders")
	if err := d.Damage(filepath.Join(topicDir, wire.IncarnationCopyFileName), 0, []byte(other+"\n")); err != nil {
		t.Fatal(err)
	}
	eio := d.Inject(sim.Fault{Op: sim.OpRead, Path: filepath.Join(topicDir, wire.IncarnationFileName), Sticky: true, Err: syscall.EIO})
	if removed := n.SweepQuarantine(bg); removed != 0 {
		t.Fatalf("the sweep removed or moved %d directories on an unreadable marker", removed)
	}
	eio.Remove()
	if got := readValues(t, n, "orders", 0); len(got) != 3 {
		t.Fatalf("the partition serves %d records, want its 3", len(got))
	}
	if b, _ := d.Contents(filepath.Join(topicDir, wire.IncarnationCopyFileName)); string(b) != string(rec.Incarnation)+"\n" {
		t.Fatalf("the open did not repair the copy: %q", b)
	}
}

// TestSweep_AnUnmarkedDirectoryNoRecordNamesIsPurged: a topic directory
// with no marker that no record names is a deleted topic's whose purge
// never ran (a record without an incarnation id leaves its directories
// unmarked); the sweep purges it, where a recreate's open would adopt it
// and serve the deleted records (found by review). One with both markers
// damaged goes the same way. An unmarked directory of a topic a record
// names stays, and serves its records.
func TestSweep_AnUnmarkedDirectoryNoRecordNamesIsPurged(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	closedTopicOfThree(t, n)
	topics := filepath.Join(dataDir, wire.TopicsDirName)
	for _, name := range []string{"ghost", "damaged"} {
		if err := d.MkdirAll(filepath.Join(topics, name, "00000")); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{wire.IncarnationFileName, wire.IncarnationCopyFileName} {
		if err := vfs.WriteFileAtomic(d, filepath.Join(topics, "damaged", f), []byte("not an id\n")); err != nil {
			t.Fatal(err)
		}
		if err := d.Remove(filepath.Join(topics, "orders", f)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var underLiveName []string // files the purge removed under a topic's own name
	d.SetHook(func(c sim.Call) error {
		for _, name := range []string{"ghost", "damaged"} {
			if live := filepath.Join(topics, name); c.Op == sim.OpRemove && (c.Path == live || strings.HasPrefix(c.Path, live+"/")) {
				mu.Lock()
				underLiveName = append(underLiveName, c.Path)
				mu.Unlock()
			}
		}
		return nil
	})
	removed := n.SweepQuarantine(bg)
	d.SetHook(nil)
	mu.Lock()
	defer mu.Unlock()
	if removed != 2 {
		t.Fatalf("the sweep removed %d directories, want the 2 no record names", removed)
	}
	if len(underLiveName) > 0 {
		t.Fatalf("the purge unlinked %v under the topic's name: a crash there leaves deleted data a recreate adopts", underLiveName)
	}
	for _, name := range []string{"ghost", "damaged"} {
		if _, err := d.Stat(filepath.Join(topics, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s after the sweep: %v", name, err)
		}
	}
	if got := readValues(t, n, "orders", 0); len(got) != 3 {
		t.Fatalf("the named topic's unmarked directory serves %d records, want its 3", len(got))
	}
}

// laggingReplica is a metastore whose replica does not name hidden yet,
// while the leader (IncarnationGone) holds its record.
type laggingReplica struct {
	*LocalMetastore
	hidden atomic.Value // string
}

func (m *laggingReplica) Topic(ctx context.Context, name string) (TopicRecord, bool, error) {
	if h, _ := m.hidden.Load().(string); name == h {
		return TopicRecord{}, false, nil
	}
	return m.LocalMetastore.Topic(ctx, name)
}

// TestSweep_AnUnmarkedDirectoryALaggingReplicaDoesNotNameStays: a live
// topic's directory with both markers damaged (the open adopts and serves
// it) while the replica, caught up by its own account, does not name the
// topic yet (a record rewritten just now): the leader holds a record, so
// the sweep keeps the directory and its records. Taking IncarnationGone
// of the empty id for "no record without an id" purged it (found by
// review).
func TestSweep_AnUnmarkedDirectoryALaggingReplicaDoesNotNameStays(t *testing.T) {
	d := newTestDisk(t, 1)
	var lag *laggingReplica
	n := startNodeWith(t, d, Config{}, func(l *LocalMetastore) Metastore { lag = &laggingReplica{LocalMetastore: l}; return lag })
	closedTopicOfThree(t, n)
	dir := filepath.Join(dataDir, wire.TopicsDirName, "orders")
	for _, f := range []string{wire.IncarnationFileName, wire.IncarnationCopyFileName} {
		if err := vfs.WriteFileAtomic(d, filepath.Join(dir, f), []byte("not an id\n")); err != nil {
			t.Fatal(err)
		}
	}
	lag.hidden.Store("orders")
	removed := n.SweepQuarantine(bg)
	lag.hidden.Store("")
	if removed != 0 {
		t.Fatalf("the sweep removed %d directories while the leader holds a record of orders", removed)
	}
	if got := readValues(t, n, "orders", 0); len(got) != 3 {
		t.Fatalf("orders serves %d records, want its 3", len(got))
	}
}

// idlessRecord is a metastore whose record of orders carries no
// incarnation id while strip is set (a record written by hand), and which
// runs after once a delete has removed the record.
type idlessRecord struct {
	*LocalMetastore
	strip atomic.Bool // read by the node's change-feed rechecks too
	after func()      // set before the delete that runs it
}

func (m *idlessRecord) Topic(ctx context.Context, name string) (TopicRecord, bool, error) {
	rec, ok, err := m.LocalMetastore.Topic(ctx, name)
	if m.strip.Load() && name == "orders" {
		rec.Incarnation = ""
	}
	return rec, ok, err
}

func (m *idlessRecord) DeleteTopic(ctx context.Context, name string) error {
	if err := m.LocalMetastore.DeleteTopic(ctx, name); err != nil {
		return err
	}
	m.strip.Store(false)
	if m.after != nil {
		m.after()
	}
	return nil
}

// TestDeleteTopic_ARecordWithoutAnIDNeverPurgesARecreatesDirectory: the
// deleted record has no incarnation id, and the name is created again,
// with records acked to it, between the record's removal and the purge.
// A record without an id stamps no marker, so a marker the purge reads is
// another incarnation's: the recreate's directory and its records stay
// (the purge took every directory with a marker that decoded: found by
// review).
func TestDeleteTopic_ARecordWithoutAnIDNeverPurgesARecreatesDirectory(t *testing.T) {
	d := newTestDisk(t, 1)
	var ms *idlessRecord
	n := startNodeWith(t, d, Config{}, func(l *LocalMetastore) Metastore { ms = &idlessRecord{LocalMetastore: l}; return ms })
	closedTopicOfThree(t, n)
	ms.strip.Store(true)
	ms.after = func() {
		if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if got := readValues(t, n, "orders", 0); len(got) != 2 {
		t.Fatalf("the recreated orders serves %d records, want the 2 acked to it", len(got))
	}
}
