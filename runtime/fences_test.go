package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// Regression tests of the node-level durability fixes: each names the
// scenario it pins, and each failed before its fix.

// TestDataDir_SecondNodeRefusedWhileTheFirstHoldsIt: a second node on one
// data directory is refused, naming the holder's pid, before it reads or
// writes anything there; once the first closes, it starts (item 1).
func TestDataDir_SecondNodeRefusedWhileTheFirstHoldsIt(t *testing.T) {
	d := newTestDisk(t, 1)
	first := startNode(t, d, Config{})
	first.CreateTopic(bg, "orders", 1, Retention{})
	if _, err := first.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	before := d.Hash()
	_, err = New(Config{DataDir: dataDir, FS: d, Metastore: ms})
	if !errors.Is(err, datadir.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Fatalf("second node: %v, want datadir.ErrLocked naming process %d", err, os.Getpid())
	}
	if d.Hash() != before {
		t.Fatal("the refused node changed the data directory")
	}
	if holder, inUse, err := datadir.InUse(d, dataDir); err != nil || !inUse || holder != fmt.Sprintf("process %d", os.Getpid()) {
		t.Fatalf("datadir.InUse = %q, %v, %v", holder, inUse, err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, inUse, err := datadir.InUse(d, dataDir); err != nil || inUse {
		t.Fatalf("datadir.InUse after close = %v, %v", inUse, err)
	}
	second, err := New(Config{DataDir: dataDir, FS: d, Metastore: ms})
	if err != nil {
		t.Fatalf("second node once the first closed: %v", err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestInstall_NoProduceOrReopenReachesThePartitionMidInstall: from the
// close of the live log to the final directory sync, the install holds the
// partition's produce gate exclusive and its topic's guard, and no log of
// the partition is open; a read racing the install waits for it and then
// serves the installed records (item 2: the install used to release both
// between the close and the swap, and a lazy reopen in that window served
// and acked writes into unlinked files).
func TestInstall_NoProduceOrReopenReachesThePartitionMidInstall(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	files, rec := installFixture(t, n)
	gate, guard := n.reg.Gate(key("orders", 0)), n.reg.Guard("orders")
	var violations []string
	var once sync.Once
	raced := make(chan []string, 1)
	committing := false // the staging files are written outside every lock; the Commit starts with the staging directory's sync
	n.disk.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpSyncDir && strings.HasSuffix(c.Path, "p00000"+wire.InstallingDirSuffix) {
			committing = true
		}
		if !committing || (!strings.Contains(c.Path+c.Path2, "p00000.install") && c.Op != sim.OpSyncDir) {
			return nil
		}
		if gate.TryLockForTest() {
			violations = append(violations, fmt.Sprintf("%s %s: produce gate free", c.Op, c.Path))
		}
		if guard.TryLockForTest() {
			violations = append(violations, fmt.Sprintf("%s %s: topic guard free", c.Op, c.Path))
		}
		if _, open := n.reg.Lookup(key("orders", 0)); open {
			violations = append(violations, fmt.Sprintf("%s %s: the partition's log is open", c.Op, c.Path))
		}
		once.Do(func() {
			go func() { raced <- readValues(t, n, "orders", 0) }()
		})
		return nil
	})
	if err := n.InstallPartition(bg, "orders", 0, rec.Incarnation, files); err != nil {
		t.Fatal(err)
	}
	n.disk.SetHook(nil)
	if len(violations) > 0 {
		t.Fatalf("the install let go of the partition:\n%s", strings.Join(violations, "\n"))
	}
	if got := <-raced; len(got) != 10 {
		t.Fatalf("a read racing the install served %d records, want the 10 installed", len(got))
	}
}

// installFixture produces 10 records to orders/0, keeps the partition's
// files as they are then (what an install will bring back), and produces
// 10 more.
func installFixture(t *testing.T, n *testNode) ([]InstallFile, TopicRecord) {
	t.Helper()
	rec, _, err := n.CreateTopic(bg, "orders", 1, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, i*2, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	listing, err := n.TransferListing(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	var files []InstallFile
	for _, s := range listing.Segments {
		b, err := n.disk.Contents(filepath.Join(partitionPath("orders", 0), s.Name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, InstallFile{Name: s.Name, Data: b})
	}
	hwm, _ := wire.EncodeOffsetFile(listing.HighWatermark)
	files = append(files, InstallFile{Name: wire.HWMFileName, Data: hwm[:]})
	for i := 5; i < 10; i++ {
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, i*2, 2)); err != nil {
			t.Fatal(err)
		}
	}
	return files, rec
}

// TestInstall_CrashAtEveryCallLeavesTheOldOrTheNewPartition: a power loss
// before any call of an install, in every crash mode, leaves the partition
// serving exactly its old records or exactly the installed ones, never an
// empty log at offset 0, and no staging directory once a node has started
// on it (item 3: a crash between the old directory's removal and the
// rename used to leave no directory, and the next open created an empty
// log that accepted writes).
func TestInstall_CrashAtEveryCallLeavesTheOldOrTheNewPartition(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	files, rec := installFixture(t, n)
	old := readValues(t, n, "orders", 0)
	explore := crashtest.NewExplorer(n.disk, func() struct{} { return struct{}{} })
	explore.Run(func() {
		if err := n.InstallPartition(bg, "orders", 0, rec.Incarnation, files); err != nil {
			t.Fatal(err)
		}
	})
	installed := readValues(t, n, "orders", 0)
	if len(old) != 20 || len(installed) != 10 {
		t.Fatalf("fixture: %d old records, %d installed", len(old), len(installed))
	}
	for _, img := range explore.Images() {
		r := startImage(t, img.Disk)
		got := readValues(t, r, "orders", 0)
		if !slices.Equal(got, old) && !slices.Equal(got, installed) {
			t.Fatalf("%s: the partition serves %d records, neither the old %d nor the installed %d", img.Label, len(got), len(old), len(installed))
		}
		assertNoInstallLeftovers(t, r.disk, img.Label)
		r.Close()
	}
	t.Logf("install crash states: %d", len(explore.Images()))
}

// startImage starts a fresh node on a crash image.
func startImage(t *testing.T, d *sim.Disk) *testNode {
	t.Helper()
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{DataDir: dataDir, FS: d, SegmentMaxBytes: 1 << 10, Testing: checkLockOrder, Metastore: ms})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		n.Close()
		t.Fatal(err)
	}
	return &testNode{Node: n, disk: d, ms: ms}
}

func assertNoInstallLeftovers(t *testing.T, d *sim.Disk, label string) {
	t.Helper()
	topics, _ := d.ReadDir(filepath.Join(dataDir, wire.TopicsDirName))
	for _, topic := range topics {
		entries, _ := d.ReadDir(filepath.Join(dataDir, wire.TopicsDirName, topic.Name))
		for _, e := range entries {
			if _, ok := installLeftover(e.Name); ok {
				t.Fatalf("%s: %s/%s left after startup", label, topic.Name, e.Name)
			}
		}
	}
}

// TestNodeClose_FencesAnOpenAlreadyUnderWay: an open that passed the
// closed check before Close began, and is still opening while Close runs,
// either lands before the fence (and Close closes it) or closes the log it
// made and answers ErrNodeClosed: no orphan actor, no descriptor left open
// once Close returns (item 5). supervisor's
// TestRegistry_CloseFencesAnOpenInFlight pins the second order.
func TestNodeClose_FencesAnOpenAlreadyUnderWay(t *testing.T) {
	n := startNode(t, nil, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	n.background.Wait() // the create's recheck: Close waits for it, and it for the guard
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	n.disk.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpReadDir && c.Path == partitionPath("orders", 0) {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	})
	read := make(chan error, 1)
	go func() {
		_, err := n.Read(bg, "orders", 0, 0, 10, 1<<20)
		read <- err
	}()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	close(release)
	if err := <-read; err != nil && !errors.Is(err, ErrNodeClosed) {
		t.Fatalf("an open racing Close: %v, want success or ErrNodeClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	n.disk.SetHook(nil)
	if n.reg.Len() != 0 || n.disk.OpenFiles() != 0 {
		t.Fatalf("after Close: %d logs registered, %d files open", n.reg.Len(), n.disk.OpenFiles())
	}
}

// TestNodeClose_AReadWhoseLogCloseClosedAnswersNodeClosed: the other order
// of TestNodeClose_FencesAnOpenAlreadyUnderWay, pinned: the open lands
// before the fence, and Close closes the log before the read reaches it.
// The read answers ErrNodeClosed, as when the open loses the race, not
// the log's ErrLogClosed (found flaking in that test).
func TestNodeClose_AReadWhoseLogCloseClosedAnswersNodeClosed(t *testing.T) {
	n := startNode(t, nil, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := n.withLog(bg, key("orders", 0), func(l *partition.Log) error {
		calls++
		if calls == 1 {
			if err := n.Close(); err != nil { // wins the race: lands between the open and the read
				t.Fatal(err)
			}
		}
		_, err := l.Read(0, 10, 1<<20)
		return err
	})
	if !errors.Is(err, ErrNodeClosed) || calls != 1 {
		t.Fatalf("a read of a log Close closed under it: %v after %d tries, want ErrNodeClosed after 1", err, calls)
	}
}

// noIncarnation is a metastore whose records carry no incarnation id
// (name-based bookkeeping, docs/design.md "The incarnation marker").
type noIncarnation struct{ *LocalMetastore }

func (m noIncarnation) Topic(ctx context.Context, name string) (TopicRecord, bool, error) {
	rec, ok, err := m.LocalMetastore.Topic(ctx, name)
	rec.Incarnation = ""
	return rec, ok, err
}

func (m noIncarnation) Topics(ctx context.Context) ([]TopicRecord, error) {
	recs, err := m.LocalMetastore.Topics(ctx)
	for i := range recs {
		recs[i].Incarnation = ""
	}
	return recs, err
}

// TestTopicDir_WithoutIncarnationIsDurableBeforeAnAck: the directory of a
// topic whose record has no incarnation is synced into topics/ before a
// record is acked into it, so a power loss at any call of the first
// produce never loses an acked record (item 6).
func TestTopicDir_WithoutIncarnationIsDurableBeforeAnAck(t *testing.T) {
	d := newTestDisk(t, 1)
	local, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{DataDir: dataDir, FS: d, Metastore: noIncarnation{local}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, _, err := n.CreateTopic(bg, "legacy", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	acked := false
	explore := crashtest.NewExplorer(d, func() bool { return acked })
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpSyncDir || c.Op == sim.OpMkdir {
			t.Logf("%s %s pending %d", c.Op, c.Path, d.PendingNameOps())
		}
		return nil
	})
	explore.Run(func() {
		if _, err := n.Produce(bg, "legacy", 0, recs("legacy", 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		acked = true
	})
	for _, img := range explore.Images() {
		local, err := OpenLocalMetastore(img.Disk, dataDir)
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(Config{DataDir: dataDir, FS: img.Disk, Metastore: noIncarnation{local}})
		if err != nil {
			t.Fatalf("%s: %v", img.Label, err)
		}
		res, err := r.Read(bg, "legacy", 0, 0, 10, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", img.Label, err)
		}
		if img.Model && len(res.Records) != 1 && !img.Garbage {
			t.Fatalf("%s: the acked record is lost (%d records)", img.Label, len(res.Records))
		}
		r.Close()
	}
}

// TestNodeLog_ClosedByItsCallerIsReopened: a log handed out by Node.Log
// and closed by its caller is noticed and reopened by the next call,
// never served dead until idle eviction (item 8).
func TestNodeLog_ClosedByItsCallerIsReopened(t *testing.T) {
	n := startNode(t, nil, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	l, err := n.Log(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatalf("produce after the caller closed the log: %v", err)
	}
	if got := readValues(t, n, "orders", 0); len(got) != 3 {
		t.Fatalf("read %d records, want 3", len(got))
	}
	again, err := n.Log(bg, "orders", 0)
	if err != nil || again == l || again.Closed() {
		t.Fatalf("Node.Log handed out %p (closed %v), %v; the closed one was %p", again, again != nil && again.Closed(), err, l)
	}
	if _, err := again.Read(0, 10, 1<<20); errors.Is(err, partition.ErrLogClosed) {
		t.Fatal("the reopened log reads as closed")
	}
}

// hookedTopic runs hook once, inside the next Topic lookup, after the
// record was read: a delete and recreate racing the caller.
type hookedTopic struct {
	*LocalMetastore
	mu   sync.Mutex
	hook func()
}

func (m *hookedTopic) Topic(ctx context.Context, name string) (TopicRecord, bool, error) {
	rec, ok, err := m.LocalMetastore.Topic(ctx, name)
	m.mu.Lock()
	h := m.hook
	m.hook = nil
	m.mu.Unlock()
	if h != nil {
		h()
	}
	return rec, ok, err
}

// TestInstall_RecordReplacedBeforeTheGuardRefusesTheInstall: a delete and
// recreate (and an acked produce to the new incarnation) landing between
// the install's record lookup and its guard refuse the install; it never
// quarantines the live incarnation's directory (review finding: the stale
// record made checkIncarnation do exactly that).
func TestInstall_RecordReplacedBeforeTheGuardRefusesTheInstall(t *testing.T) {
	d := newTestDisk(t, 1)
	local, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	ms := &hookedTopic{LocalMetastore: local}
	node, err := New(Config{DataDir: dataDir, FS: d, SegmentMaxBytes: 1 << 10, Testing: checkLockOrder, Metastore: ms})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(bg); err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	n := &testNode{Node: node, disk: d, ms: local}
	files, old := installFixture(t, n)
	ms.mu.Lock()
	ms.hook = func() {
		if err := n.DeleteTopic(bg, "orders"); err != nil {
			t.Error(err)
		}
		if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
			t.Error(err)
		}
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 100, 3)); err != nil {
			t.Error(err)
		}
	}
	ms.mu.Unlock()
	if err := n.InstallPartition(bg, "orders", 0, old.Incarnation, files); !errors.Is(err, ErrStaleIncarnation) {
		t.Fatalf("install of a deleted incarnation: %v, want ErrStaleIncarnation", err)
	}
	if got := readValues(t, n, "orders", 0); len(got) != 3 {
		t.Fatalf("the live incarnation serves %d records, want its 3 acked ones", len(got))
	}
}

// TestInstall_FailureAfterStagingCompletesIsSettledFirst: an install whose
// topic-directory sync fails once its staging directory is complete is
// finished by the next open, before anything is acked into the old
// directory, so a restart never rolls it forward over later acks (review
// finding: the partition was not marked unsettled there).
func TestInstall_FailureAfterStagingCompletesIsSettledFirst(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	files, rec := installFixture(t, n)
	in := n.disk.Inject(sim.Fault{Op: sim.OpSyncDir, Path: filepath.Join(dataDir, "topics", "orders"), Nth: 1, Err: syscall.EIO})
	err := n.InstallPartition(bg, "orders", 0, rec.Incarnation, files)
	in.Remove()
	if err == nil {
		t.Fatal("the injected sync failure did not fail the install")
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 20, 3)); err != nil {
		t.Fatal(err)
	}
	before := readValues(t, n, "orders", 0)
	if len(before) != 13 {
		t.Fatalf("after the failed install and 3 acks: %d records, want the 10 installed and 3", len(before))
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	r := startImage(t, n.disk) // a clean restart
	defer r.Close()
	if after := readValues(t, r, "orders", 0); !slices.Equal(before, after) {
		t.Fatalf("a clean restart serves %d records, %d before", len(after), len(before))
	}
}

// TestInstall_UnsettledPartitionIsNeverDescribedAsEmpty: a partition whose
// install failed between the two renames (no pNNNNN directory for a
// moment) is settled before a listing or peek reads it, never reported
// as empty with a known boundary of 0 (review finding).
func TestInstall_UnsettledPartitionIsNeverDescribedAsEmpty(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	files, rec := installFixture(t, n)
	in := n.disk.Inject(sim.Fault{Op: sim.OpRename, Path: partitionPath("orders", 0) + ".install", Nth: 2, Err: syscall.EIO})
	err := n.InstallPartition(bg, "orders", 0, rec.Incarnation, files)
	in.Remove()
	if err == nil {
		t.Fatal("the injected rename failure did not fail the install")
	}
	listing, err := n.TransferListing(bg, "orders", 0)
	if err != nil || !listing.Known || listing.HighWatermark != 10 || len(listing.Segments) == 0 {
		t.Fatalf("listing of the settled install: %+v, %v; want the 10 installed records", listing, err)
	}
	if hwm, known, err := n.PeekHighWatermark("orders", 0); err != nil || !known || hwm != 10 {
		t.Fatalf("peek: %d, %v, %v", hwm, known, err)
	}
}

// TestNodeClose_WaitsForAnInstallBeforeReleasingTheLock: Close lets an
// install under way finish before the data directory's lock goes, so a
// second node can never settle the same install concurrently (review
// finding: Close fenced only opens).
func TestNodeClose_WaitsForAnInstallBeforeReleasingTheLock(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	files, rec := installFixture(t, n)
	n.background.Wait()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	final := partitionPath("orders", 0)
	n.disk.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRename && c.Path == final && c.Path2 == final+wire.ReplacedDirSuffix {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	})
	installed := make(chan error, 1)
	go func() { installed <- n.InstallPartition(bg, "orders", 0, rec.Incarnation, files) }()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	ms, err := OpenLocalMetastore(n.disk, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := New(Config{DataDir: dataDir, FS: n.disk, Metastore: ms}); !errors.Is(err, datadir.ErrLocked) {
		if err == nil {
			second.Close()
		}
		t.Fatalf("a second node while the first's install runs: %v, want datadir.ErrLocked", err)
	}
	close(release)
	if err := <-installed; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	n.disk.SetHook(nil)
	r := startImage(t, n.disk)
	defer r.Close()
	if got := readValues(t, r, "orders", 0); len(got) != 10 {
		t.Fatalf("after the install and a restart: %d records, want the 10 installed", len(got))
	}
}

// TestDeleteTopic_PurgeCutOffByCloseIsFinishedBySweep: a delete whose
// purge never ran (the node closed between the record's removal and the
// purge) leaves a directory no record names; the quarantine sweep at the
// next start purges it once the metastore confirms its incarnation gone
// (review finding: it stayed on disk for good).
func TestDeleteTopic_PurgeCutOffByCloseIsFinishedBySweep(t *testing.T) {
	n := startNode(t, nil, Config{})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteTopic(bg, "orders"); !errors.Is(err, ErrNodeClosed) {
		t.Fatalf("delete after Close: %v, want the record removed and ErrNodeClosed for the purge", err)
	}
	dir := filepath.Join(dataDir, wire.TopicsDirName, "orders")
	if ok, _ := vfs.Exists(n.disk, dir); !ok {
		t.Fatal("fixture: the purge ran")
	}
	r := startImage(t, n.disk) // Start sweeps
	defer r.Close()
	if ok, _ := vfs.Exists(r.disk, dir); ok {
		t.Fatal("the deleted topic's directory outlives a restart")
	}
	// A live topic's directory is never purged by the sweep.
	if _, _, err := r.CreateTopic(bg, "live", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Produce(bg, "live", 0, recs("live", 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if removed := r.SweepQuarantine(bg); removed != 0 {
		t.Fatalf("the sweep removed %d directories of live topics", removed)
	}
	if got := readValues(t, r, "live", 0); len(got) != 1 {
		t.Fatalf("live topic serves %d records after the sweep", len(got))
	}
}

// laggingMetastore is a replica whose leader has deleted an incarnation
// the replica still holds.
type laggingMetastore struct {
	*LocalMetastore
	goneAtLeader wire.IncarnationID
}

func (m laggingMetastore) IncarnationGone(ctx context.Context, name string, id wire.IncarnationID) (bool, error) {
	if id == m.goneAtLeader {
		return true, nil
	}
	return m.LocalMetastore.IncarnationGone(ctx, name, id)
}

// TestSweep_NeverPurgesATopicItsOwnRecordNames: the orphan purge leaves a
// directory alone while the node's own metastore names the topic, whatever
// the leader says of its marker's incarnation and whether the record has
// an id at all (review findings: a lagging replica's live topic was purged
// and its offsets reused; so was a live topic whose record has no id).
func TestSweep_NeverPurgesATopicItsOwnRecordNames(t *testing.T) {
	d := newTestDisk(t, 1)
	local, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := local.CreateTopic(bg, "orders", 1, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := local.CreateTopic(bg, "legacy", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	ms := noIncarnationFor{laggingMetastore{LocalMetastore: local, goneAtLeader: rec.Incarnation}, "legacy"}
	n, err := New(Config{DataDir: dataDir, FS: d, Testing: checkLockOrder, Metastore: ms})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, topic := range []string{"orders", "legacy"} {
		if _, err := n.Produce(bg, topic, 0, recs(topic, 0, 0, 3)); err != nil {
			t.Fatal(err)
		}
	}
	// legacy's directory carries a marker its id-less record never checks.
	b, _ := wire.EncodeIncarnationMarker("0123456789abcdef")
	if err := vfs.WriteFileAtomic(d, filepath.Join(dataDir, wire.TopicsDirName, "legacy", wire.IncarnationFileName), b); err != nil {
		t.Fatal(err)
	}
	if removed := n.SweepQuarantine(bg); removed != 0 {
		t.Fatalf("the sweep removed %d directories of topics the node serves", removed)
	}
	for _, topic := range []string{"orders", "legacy"} {
		if base, err := n.Produce(bg, topic, 0, recs(topic, 0, 3, 1)); err != nil || base != 3 {
			t.Fatalf("%s: next produce at %d, %v; want 3", topic, base, err)
		}
	}
}

// noIncarnationFor strips the incarnation id of one topic's record.
type noIncarnationFor struct {
	laggingMetastore
	topic string
}

func (m noIncarnationFor) Topic(ctx context.Context, name string) (TopicRecord, bool, error) {
	rec, ok, err := m.laggingMetastore.Topic(ctx, name)
	if name == m.topic {
		rec.Incarnation = ""
	}
	return rec, ok, err
}
