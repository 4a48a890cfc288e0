package runtime

// Regressions found by review of the fan-out cursors, one test each.

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// Review tests of the fan-out cursor code (3208581).

// startNodeNoCleanup is startNode without the Close at cleanup: a test
// that leaves goroutines deadlocked on the node must not hang in Close.
func startNodeNoCleanup(t *testing.T, d *sim.Disk) *testNode {
	t.Helper()
	cfg := Config{DataDir: dataDir, FS: d, SegmentMaxBytes: 4 << 10}
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metastore = ms
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		t.Fatal(err)
	}
	return &testNode{Node: n, disk: d, ms: ms}
}

// within runs fn and fails the test if it has not returned in time.
func within(t *testing.T, what string, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		buf = buf[:goruntime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "ReadCursor") {
				t.Logf("%s", g)
			}
		}
		t.Fatalf("%s: still blocked after %v (deadlock)", what, d)
	}
}

// TestCursor_DeletingOneLeavesTheOthers: a cursor's delete drops its own
// state only: another cursor of the same partition keeps its unwritten
// position.
func TestCursor_DeletingOneLeavesTheOthers(t *testing.T) {
	n := startNode(t, nil, Config{})
	makeTopic(t, n, "orders", 1, 10)
	for _, name := range []string{"a", "b"} {
		if _, err := n.CreateCursor(bg, "orders", name, CursorEarliest); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := n.ReadCursor(bg, "orders", "b", 0, 5, 1<<20, true); err != nil || offsetsOf(r) != "[0 1 2 3 4]" {
		t.Fatalf("b's first read: %s, %v", offsetsOf(r), err)
	}
	if err := n.DeleteCursor(bg, "orders", "a"); err != nil {
		t.Fatal(err)
	}
	if r, err := n.ReadCursor(bg, "orders", "b", 0, 10, 1<<20, true); err != nil || offsetsOf(r) != "[5 6 7 8 9]" {
		t.Fatalf("b after deleting a: %s, %v; want [5 6 7 8 9] (b was rewound by a's delete)", offsetsOf(r), err)
	}
}

// TestCursor_AReadMeetingAQuarantineDoesNotDeadlock: a read whose reopen
// quarantines a recreated topic's directory (dropping the cursor under the
// guard) does not wait on itself: reads hold no lock a drop takes.
func TestCursor_AReadMeetingAQuarantineDoesNotDeadlock(t *testing.T) {
	n := startNodeNoCleanup(t, newTestDisk(t, 1))
	makeTopic(t, n, "orders", 1, 5)
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ReadCursor(bg, "orders", "audit", 0, 2, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	// Deleted and recreated behind the node's back (it missed the purge);
	// the recheck closes the old incarnation's log.
	n.ms.DeleteTopic(bg, "orders")
	n.ms.CreateTopic(bg, "orders", 1, Retention{})
	n.background.Wait()
	within(t, "ReadCursor through a cursor of the deleted incarnation", 5*time.Second, func() {
		_, err := n.ReadCursor(bg, "orders", "audit", 0, 10, 1<<20, true)
		t.Logf("ReadCursor: %v", err)
	})
	n.Close()
}

// TestCursor_AReadAndAnInstallDoNotDeadlock: a read waiting for the topic's
// guard and an install holding it (and dropping the partition's cursors)
// both finish.
func TestCursor_AReadAndAnInstallDoNotDeadlock(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNodeNoCleanup(t, d)
	rec, _, err := n.CreateTopic(bg, "orders", 1, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	produceN(t, n, "orders", 1, 5)
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ReadCursor(bg, "orders", "audit", 0, 2, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	if c := n.cursors.lookup(cursorKey{key("orders", 0), "audit"}); c == nil {
		t.Fatal("cursor not in memory")
	}
	marker := filepath.Join(dataDir, "topics", "orders", wire.IncarnationFileName)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.SetHook(func(call sim.Call) error {
		if call.Path == marker {
			once.Do(func() { close(entered); <-release })
		}
		return nil
	})
	hwm, _ := wire.EncodeOffsetFile(0)
	installed := make(chan error, 1)
	go func() {
		installed <- n.InstallPartition(bg, "orders", 0, rec.Incarnation, []InstallFile{{Name: wire.HWMFileName, Data: hwm[:]}})
	}()
	<-entered // the install holds the guard, the log is closed
	read := make(chan error, 1)
	go func() {
		_, err := n.ReadCursor(bg, "orders", "audit", 0, 10, 1<<20, true)
		read <- err
	}()
	for range 1000 { // let the read reach the guard (a mutex wait no test can see)
		goruntime.Gosched()
	}
	close(release)
	select {
	case err := <-installed:
		t.Logf("install: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("InstallPartition and ReadCursor deadlocked: install holds the guard waiting for c.mu, the read holds c.mu waiting for the guard")
	}
	<-read
	d.SetHook(nil)
	n.Close()
}

// Bug 3: an install that fails after its staging directory is complete
// (here: the topic directory's sync) leaves the partition unsettled, its
// old directory still at the final name, and the cursors forgotten.
// cursorOf loads without settleBeforeOpen, so it reads the OLD
// directory's position, caches it (written -1), and the next write-out
// writes it over the installed file once the install is rolled forward.
// The installed partition's cursor position is not the installed file's.
// unsettledInstallOfAuditAt7 makes topic orders (10 records, cursor
// audit at 0) and installs the same partition with audit at 7, failing
// the install past its commit point (an EIO on the topic directory's
// sync after the staging directory is complete): the partition is left
// unsettled, the old directory still at its name.
func unsettledInstallOfAuditAt7(t *testing.T, n *testNode, d *sim.Disk) {
	t.Helper()
	rec, _, err := n.CreateTopic(bg, "orders", 1, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	produceN(t, n, "orders", 1, 10)
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	listing, err := n.TransferListing(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := partitionPath("orders", 0)
	var files []InstallFile
	for _, s := range listing.Segments {
		b, err := d.Contents(filepath.Join(dir, s.Name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, InstallFile{Name: s.Name, Data: b})
	}
	hwm, _ := wire.EncodeOffsetFile(listing.HighWatermark)
	pos, _ := wire.EncodeOffsetFile(7)
	files = append(files, InstallFile{Name: wire.HWMFileName, Data: hwm[:]}, InstallFile{Name: "cursor.audit", Data: pos[:]})
	topicDir := filepath.Join(dataDir, "topics", "orders")
	var mu sync.Mutex
	staged := false
	d.SetHook(func(call sim.Call) error {
		mu.Lock()
		defer mu.Unlock()
		if call.Op == sim.OpRename && strings.HasSuffix(call.Path2, wire.InstallDirSuffix) {
			staged = true
		}
		if staged && call.Op == sim.OpSyncDir && call.Path == topicDir {
			staged = false
			return syscall.EIO
		}
		return nil
	})
	defer d.SetHook(nil)
	if err := n.InstallPartition(bg, "orders", 0, rec.Incarnation, files); err == nil {
		t.Fatal("install: want the injected EIO")
	}
}

// TestCursor_AnUnsettledInstallIsSettledBeforeALoad: after an install that
// failed past its commit point, a cursor's load settles it first and takes
// the installed position, never the replaced directory's.
func TestCursor_AnUnsettledInstallIsSettledBeforeALoad(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	unsettledInstallOfAuditAt7(t, n, d)
	got, err := n.Cursor(bg, "orders", "audit")
	if err != nil {
		t.Fatal(err)
	}
	n.cursors.writeOutAll()
	b, _ := d.Contents(filepath.Join(partitionPath("orders", 0), "cursor.audit"))
	st, err := wire.DecodeCursorFile(b)
	if onDisk := st.Slot.Position; err != nil || got[0].Position != 7 || onDisk != 7 {
		t.Fatalf("after the install rolled forward: cursor at %d in memory, %d on disk (%v); want the installed 7", got[0].Position, onDisk, err)
	}
}

// TestCursor_APositionPastTheHighWatermarkIsNotTrusted: a position file
// above the high watermark (a flipped bit) is damage: the cursor starts
// again from the first record and skips nothing.
func TestCursor_APositionPastTheHighWatermarkIsNotTrusted(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	makeTopic(t, n, "orders", 1, 5)
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ReadCursor(bg, "orders", "audit", 0, 5, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil { // position 5 written out
		t.Fatal(err)
	}
	// One bit flips in a file of the older, unchecked 8-byte format:
	// 5 -> 5|16 = 21.
	path := filepath.Join(partitionPath("orders", 0), "cursor.audit")
	var flipped [8]byte
	binary.BigEndian.PutUint64(flipped[:], 5|16)
	if err := vfs.WriteFileAtomic(d, path, flipped[:]); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, d, Config{})
	if _, err := n.ReadCursor(bg, "orders", "audit", 0, 100, 1<<20, true); err != nil {
		t.Logf("read with the position past the hwm: %v", err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 5, 20)); err != nil {
		t.Fatal(err)
	}
	r, err := n.ReadCursor(bg, "orders", "audit", 0, 100, 1<<20, true)
	if err != nil || len(r.Records) == 0 || r.Records[0].Offset != 5 {
		t.Fatalf("read after 20 more records: %s (skipped %d), %v; want from offset 5", offsetsOf(r), r.Skipped, err)
	}
}

// TestCursor_PeeksCountNoDroppedRecords: peeks over a damaged frame report
// what they stepped over but count nothing: only the read that moves the
// cursor past it counts it.
func TestCursor_PeeksCountNoDroppedRecords(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	makeTopic(t, n, "jobs", 1, 0)
	for i := range 2 {
		if _, err := n.Produce(bg, "jobs", 0, recs("jobs", 0, i*5, 5)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.CreateCursor(bg, "jobs", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(partitionPath("jobs", 0), "00000000000000000000.log")
	if err := d.Damage(seg, frameStart(t, d, seg, 0)+40, []byte("rot")); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	n = startNode(t, d, Config{Registerer: reg})
	total := int64(0)
	for range 3 {
		r, err := n.ReadCursor(bg, "jobs", "audit", 0, 100, 1<<20, false)
		if err != nil {
			t.Fatal(err)
		}
		total += r.Skipped
	}
	if got := series(t, reg, "narad_fanout_child_dropped_messages"); got != "cursor=audit topic=jobs 0\n" || total != 15 {
		t.Fatalf("three peeks (the cursor passed nothing): Skipped summed to %d (want 5 each), metric %q (want 0)", total, got)
	}
	if r, err := n.ReadCursor(bg, "jobs", "audit", 0, 100, 1<<20, true); err != nil || r.Skipped != 5 {
		t.Fatalf("the advancing read: skipped %d, %v", r.Skipped, err)
	}
	if got := series(t, reg, "narad_fanout_child_dropped_messages"); got != "cursor=audit topic=jobs 5\n" {
		t.Fatalf("after the advancing read: metric %q, want 5", got)
	}
}

// TestCursor_ATornWriteOutNeverStepsForward: a crash between a write-out
// and its sync, leaving garbage in the sector, never puts a cursor past the
// high watermark.
func TestCursor_ATornWriteOutNeverStepsForward(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	makeTopic(t, n, "orders", 1, 10)
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ReadCursor(bg, "orders", "audit", 0, 4, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(partitionPath("orders", 0), "cursor.audit")
	var images []*sim.Disk
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpSync && c.Path == path && images == nil {
			// The power goes between the write and its sync.
			for seed := range uint64(8) {
				images = append(images, d.Crash(sim.CrashPlan{Data: sim.TearUnsynced, Garbage: true, Seed: seed,
					KeepSector: func(string, int64) bool { return false }}))
			}
		}
		return nil
	})
	n.cursors.writeOutAll()
	d.SetHook(nil)
	for seed, img := range images {
		m := startNode(t, img, Config{})
		pos, err := m.Cursor(bg, "orders", "audit")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := img.Contents(path)
		t.Logf("seed %d: file %x, position %v", seed, b, pos)
		if pos[0].Position > pos[0].HighWatermark {
			t.Fatalf("crash image %d: cursor at %d, high watermark %d: a crash stepped the cursor forward", seed, pos[0].Position, pos[0].HighWatermark)
		}
		m.Close()
	}
}

// TestCursor_ACreateAfterARecreateBehindTheNodesBackMakesIt: a create on a
// topic deleted and recreated behind the node's back makes the cursor in
// the new incarnation, not the old one's memory.
func TestCursor_ACreateAfterARecreateBehindTheNodesBackMakesIt(t *testing.T) {
	n := startNode(t, nil, Config{})
	makeTopic(t, n, "orders", 1, 5)
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	n.ms.DeleteTopic(bg, "orders")
	n.ms.CreateTopic(bg, "orders", 1, Retention{})
	n.background.Wait()
	created, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 100, 1)); err != nil {
		t.Fatal(err)
	}
	if pos, err := n.Cursor(bg, "orders", "audit"); err != nil {
		t.Fatalf("CreateCursor on the recreated topic said ok (created=%v), yet the cursor is gone: %v %v", created, pos, err)
	}
}

// TestCursor_ADeleteSettlesAnUnfinishedInstallFirst: a delete after an
// install that failed past its commit point settles the install first, so
// the installed file is the one deleted and the cursor does not come back.
func TestCursor_ADeleteSettlesAnUnfinishedInstallFirst(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	unsettledInstallOfAuditAt7(t, n, d)
	if err := n.DeleteCursor(bg, "orders", "audit"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.HighWatermark(bg, "orders", 0); err != nil {
		t.Fatal(err)
	}
	if got, err := n.Cursor(bg, "orders", "audit"); !errors.Is(err, ErrCursorNotFound) {
		t.Fatalf("a deleted cursor: %v, %v; want ErrCursorNotFound", got, err)
	}
}
