package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/narad-io/storage/internal/fsys"
	"github.com/narad-io/storage/partition"
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
	first.CreateTopic(bg, "orders", 1, 0)
	if _, err := first.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	before := d.Hash()
	_, err = New(Config{DataDir: dataDir, FS: d}, ms, nil, nil)
	if !errors.Is(err, ErrDataDirLocked) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Fatalf("second node: %v, want ErrDataDirLocked naming process %d", err, os.Getpid())
	}
	if d.Hash() != before {
		t.Fatal("the refused node changed the data directory")
	}
	if holder, inUse, err := DataDirInUse(d, dataDir); err != nil || !inUse || holder != fmt.Sprintf("process %d", os.Getpid()) {
		t.Fatalf("DataDirInUse = %q, %v, %v", holder, inUse, err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, inUse, err := DataDirInUse(d, dataDir); err != nil || inUse {
		t.Fatalf("DataDirInUse after close = %v, %v", inUse, err)
	}
	second, err := New(Config{DataDir: dataDir, FS: d}, ms, nil, nil)
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
	n.disk.SetHook(func(c fsys.Call) error {
		if !strings.Contains(c.Path+c.Path2, "p00000.install") && c.Op != fsys.OpSyncDir {
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
	rec, _, err := n.CreateTopic(bg, "orders", 1, 0)
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
	explore := newCrashExplorer(n.disk, func() struct{} { return struct{}{} })
	explore.run(t, func() {
		if err := n.InstallPartition(bg, "orders", 0, rec.Incarnation, files); err != nil {
			t.Fatal(err)
		}
	})
	installed := readValues(t, n, "orders", 0)
	if len(old) != 20 || len(installed) != 10 {
		t.Fatalf("fixture: %d old records, %d installed", len(old), len(installed))
	}
	for _, img := range explore.images {
		r := startImage(t, img.disk)
		got := readValues(t, r, "orders", 0)
		if !equalStrings(got, old) && !equalStrings(got, installed) {
			t.Fatalf("%s: the partition serves %d records, neither the old %d nor the installed %d", img.label, len(got), len(old), len(installed))
		}
		assertNoInstallLeftovers(t, r.disk, img.label)
		r.Close()
	}
	t.Logf("install crash states: %d", len(explore.images))
}

// startImage starts a fresh node on a crash image.
func startImage(t *testing.T, d *fsys.Disk) *testNode {
	t.Helper()
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{DataDir: dataDir, FS: d, SegmentMaxBytes: 1 << 10, CheckLockOrder: true}, ms, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		n.Close()
		t.Fatal(err)
	}
	return &testNode{Node: n, disk: d, ms: ms}
}

func assertNoInstallLeftovers(t *testing.T, d *fsys.Disk, label string) {
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

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestNodeClose_FencesAnOpenAlreadyUnderWay: an open that passed the
// closed check before Close began, and is still opening when Close has
// listed and closed the open logs, closes the log it made and answers
// ErrNodeClosed: no orphan actor, no descriptor left open (item 5).
func TestNodeClose_FencesAnOpenAlreadyUnderWay(t *testing.T) {
	n := startNode(t, nil, Config{})
	n.CreateTopic(bg, "orders", 1, 0)
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	n.background.Wait() // the create's recheck: Close waits for it, and it for the guard
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	n.disk.SetHook(func(c fsys.Call) error {
		if c.Op == fsys.OpReadDir && c.Path == partitionPath("orders", 0) {
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
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-read; !errors.Is(err, ErrNodeClosed) {
		t.Fatalf("an open racing Close: %v, want ErrNodeClosed", err)
	}
	n.disk.SetHook(nil)
	if n.reg.Len() != 0 || n.disk.OpenFiles() != 0 {
		t.Fatalf("after Close: %d logs registered, %d files open", n.reg.Len(), n.disk.OpenFiles())
	}
}

// noIncarnation is a metastore whose records carry no incarnation id
// (name-based bookkeeping, storage-engine.txt "The incarnation marker").
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
	n, err := New(Config{DataDir: dataDir, FS: d}, noIncarnation{local}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, _, err := n.CreateTopic(bg, "legacy", 1, 0); err != nil {
		t.Fatal(err)
	}
	acked := false
	explore := newCrashExplorer(d, func() bool { return acked })
	d.SetHook(func(c fsys.Call) error {
		if c.Op == fsys.OpSyncDir || c.Op == fsys.OpMkdir {
			t.Logf("%s %s pending %d", c.Op, c.Path, d.PendingNameOps())
		}
		return nil
	})
	explore.run(t, func() {
		if _, err := n.Produce(bg, "legacy", 0, recs("legacy", 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		acked = true
	})
	for _, img := range explore.images {
		local, err := OpenLocalMetastore(img.disk, dataDir)
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(Config{DataDir: dataDir, FS: img.disk}, noIncarnation{local}, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", img.label, err)
		}
		res, err := r.Read(bg, "legacy", 0, 0, 10, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", img.label, err)
		}
		if img.model && len(res.Records) != 1 && !img.garbage {
			t.Fatalf("%s: the acked record is lost (%d records)", img.label, len(res.Records))
		}
		r.Close()
	}
}

// TestNodeLog_ClosedByItsCallerIsReopened: a log handed out by Node.Log
// and closed by its caller is noticed and reopened by the next call,
// never served dead until idle eviction (item 8).
func TestNodeLog_ClosedByItsCallerIsReopened(t *testing.T) {
	n := startNode(t, nil, Config{})
	n.CreateTopic(bg, "orders", 1, 0)
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
