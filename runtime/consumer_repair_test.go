package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// TestConsumer_AFailedRepairLeavesNoOrphanInTheCommitter: a repair that
// fails after its first tick (here its fdatasync) fails the recovery; the
// tick had handed the consumer to the committer, so recovery drops it and
// takes it back (found by review: the next write-out met the orphan's
// closed file and panicked).
func TestConsumer_AFailedRepairLeavesNoOrphanInTheCommitter(t *testing.T) {
	d := newTestDisk(t, 1)
	// A long commit interval: the loop writes out at most once, at its
	// start; the test runs the write-out itself.
	n := startNode(t, d, Config{ConsumerOffsetCommitInterval: time.Hour})
	n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 300))
	n.Ack(bg, "orders", 0, 0, 1, 2)
	n.reg.CloseLive(key("orders", 0)) // consumer.ahead and consumer.offset written out
	dir := filepath.Join(dataDir, "topics", "orders", "p00000")
	// consumer.offset 500, above the hwm of 300: recovery rejects it and repairs.
	if err := writeRaw(d, filepath.Join(dir, wire.ConsumerOffsetFileName), []byte{0, 0, 0, 0, 0, 0, 1, 0xf4}); err != nil {
		t.Fatal(err)
	}
	// Sync 1 of consumer.ahead is recovery's own; sync 2 is the repair's.
	in := d.Inject(sim.Fault{Op: sim.OpSync, Path: filepath.Join(dir, wire.ConsumerAheadFileName), Nth: 2, Err: syscall.EIO})
	if _, err := n.ConsumerState(bg, "orders", 0); err == nil {
		t.Fatal("recovery should fail with the repair's sync")
	}
	in.Remove()
	n.committer.mu.Lock()
	var handed []*consumer
	for c := range n.committer.unsyncedSet {
		handed = append(handed, c)
	}
	n.committer.mu.Unlock()
	orphans := 0
	for _, c := range handed {
		n.consumers.mu.Lock()
		published := n.consumers.by[c.key] == c
		n.consumers.mu.Unlock()
		c.mu.Lock()
		live := !c.dropped // a settled or dropped one is left alone by the write-out
		c.mu.Unlock()
		if !published && live {
			orphans++
		}
	}
	var panicked any
	n.committer.writeOutAll(func(_ string, f func()) {
		defer func() {
			if r := recover(); r != nil {
				panicked = r
			}
		}()
		f()
	})
	if orphans > 0 || panicked != nil {
		t.Fatalf("after a failed repair: %d unpublished consumer(s) left in the unsynced set; the write-out panicked: %v", orphans, fmt.Sprint(panicked))
	}
}

func writeRaw(d *sim.Disk, path string, b []byte) error {
	f, err := d.OpenFile(path, os.O_RDWR)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Sync()
}

// TestConsumer_ARepairNeverOverwritesTheAnchorBeforeItsWindowIsDurable: a
// repair writes both consumer.ahead slots; the one holding the recovered
// record, the only durable one, must not be written until the other is
// synced, or a power loss between the two writes and their fdatasync can
// tear both and lose acks written out long before (found by review).
// Every unsynced slot write is torn here: only its first sector lands.
func TestConsumer_ARepairNeverOverwritesTheAnchorBeforeItsWindowIsDurable(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{ConsumerOffsetCommitInterval: time.Hour})
	n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 300))
	if _, err := n.Ack(bg, "orders", 0, 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := n.reg.CloseLive(key("orders", 0)); err != nil { // written out: frontier 3
		t.Fatal(err)
	}
	dir := filepath.Join(dataDir, "topics", "orders", "p00000")
	// consumer.offset 500, above the hwm of 300: recovery rejects it and repairs.
	if err := writeRaw(d, filepath.Join(dir, wire.ConsumerOffsetFileName), []byte{0, 0, 0, 0, 0, 0, 1, 0xf4}); err != nil {
		t.Fatal(err)
	}
	aheadPath := filepath.Join(dir, wire.ConsumerAheadFileName)
	tear := sim.CrashPlan{Data: sim.TearUnsynced, KeepSector: func(p string, sector int64) bool {
		return p != aheadPath || sector%(wire.AheadSlotSize/512) == 0
	}}
	var images []*sim.Disk
	syncs := 0
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpSync && c.Path == aheadPath {
			if syncs++; syncs > 1 { // the first is recovery's own; the rest the repair's
				images = append(images, d.Crash(tear))
			}
		}
		return nil
	})
	if _, err := n.ConsumerState(bg, "orders", 0); err != nil {
		t.Fatal(err)
	}
	d.SetHook(nil)
	if len(images) == 0 {
		t.Fatal("no repair ran")
	}
	for i, img := range images {
		crashed := startNode(t, img, Config{})
		st, err := crashed.ConsumerState(bg, "orders", 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.Frontier != 3 {
			t.Errorf("a power loss before the repair's fdatasync %d left frontier %d, want 3: acks written out before the repair were lost", i+1, st.Frontier)
		}
	}
}
