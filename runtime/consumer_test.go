package runtime

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

func runItem(_ string, f func()) { f() }

// ackModel is what has really been acked: the truth a recovered frontier
// is checked against.
type ackModel struct{ acked map[int64]bool }

func (m *ackModel) frontier() int64 {
	f := int64(0)
	for m.acked[f] {
		f++
	}
	return f
}

// TestConsumer_AcksFrontierAndSet: out-of-order and duplicate acks, acks
// below the frontier, and acks at or above the high watermark (rejected).
func TestConsumer_AcksFrontierAndSet(t *testing.T) {
	n := startNode(t, nil, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 10))
	steps := []struct {
		acks     []int64
		frontier int64
		ahead    string
	}{
		{[]int64{5, 6, 9}, 0, "[5 6 9]"},
		{[]int64{0, 1}, 2, "[5 6 9]"},
		{[]int64{1, 5, 5}, 2, "[5 6 9]"}, // duplicates and below the frontier
		{[]int64{2, 3, 4}, 7, "[9]"},
	}
	for _, s := range steps {
		f, err := n.Ack(bg, "orders", 0, s.acks...)
		if err != nil || f != s.frontier {
			t.Fatalf("ack %v = %d, %v; want frontier %d", s.acks, f, err, s.frontier)
		}
		st, _ := n.ConsumerState(bg, "orders", 0)
		if fmt.Sprint(st.AckedAhead) != s.ahead || st.Frontier != s.frontier {
			t.Fatalf("after %v: %+v, want frontier %d ahead %s", s.acks, st, s.frontier, s.ahead)
		}
	}
	for _, bad := range []int64{10, 11, -1} {
		if _, err := n.Ack(bg, "orders", 0, 8, bad); !errors.Is(err, partition.ErrBeyondHighWatermark) {
			t.Fatalf("ack of %d: %v", bad, err)
		}
	}
	if st, _ := n.ConsumerState(bg, "orders", 0); st.Frontier != 7 || fmt.Sprint(st.AckedAhead) != "[9]" {
		t.Fatalf("a rejected ack changed the state: %+v", st)
	}
}

// TestConsumer_CrashAtEveryPointOfTheCycle takes crash images (unsynced
// data dropped, kept, torn; lying fsync) before every write to the
// consumer files during random acks, ticks and write-outs, and checks each
// recovered state: the frontier never passes an unacked offset, every
// acked-ahead offset was acked, and the frontier is no lower than the last
// write-out's (invariant I9).
func TestConsumer_CrashAtEveryPointOfTheCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 3)
		n := startNode(t, d, Config{})
		n.CreateTopic(bg, "orders", 1, Retention{})
		n.Produce(bg, "orders", 0, recs("orders", 0, 0, 200))
		model := &ackModel{acked: map[int64]bool{}}
		durable := int64(0)
		type image struct {
			disk     *sim.Disk
			acked    map[int64]bool
			frontier int64
			durable  int64
			label    string
		}
		var images []image
		lie := 0
		d.SetHook(func(c sim.Call) error {
			if !strings.Contains(c.Path, "consumer.") || (c.Op != sim.OpWrite && c.Op != sim.OpSync && c.Op != sim.OpOpen) {
				return nil
			}
			acked := map[int64]bool{}
			for o := range model.acked {
				acked[o] = true
			}
			for i, plan := range []sim.CrashPlan{{}, {Data: sim.KeepUnsynced, KeepNameOps: -1}, {Data: sim.TearUnsynced, Seed: uint64(len(images))}, {Data: sim.TearUnsynced, Garbage: true, Seed: 7}} {
				images = append(images, image{d.Crash(plan), acked, model.frontier(), durable, fmt.Sprintf("before %s %s, plan %d", c.Op, filepath.Base(c.Path), i)})
			}
			return nil
		})
		rng := rand.New(rand.NewPCG(1, 2))
		for round := range 40 {
			var acks []int64
			for range 1 + rng.IntN(6) {
				o := int64(rng.IntN(60 + 4*round))
				acks = append(acks, min(o, 199))
			}
			if _, err := n.Ack(bg, "orders", 0, acks...); err != nil {
				t.Fatal(err)
			}
			for _, o := range acks {
				model.acked[o] = true
			}
			n.committer.tickAll(runItem)
			if round%3 == 2 {
				if round%9 == 8 {
					lie++
					d.Inject(sim.Fault{Op: sim.OpSync, Nth: 1, Lie: true})
				}
				ticked := model.frontier()
				n.committer.writeOutAll(runItem)
				if round%9 == 8 {
					// A lying sync made nothing durable, and the slot it
					// flipped away from is overwritten next: until an
					// honest write-out, only I9's upper bound holds.
					durable = 0
				} else {
					durable = ticked
				}
			}
		}
		d.SetHook(nil)
		for _, img := range images {
			m, err := OpenLocalMetastore(img.disk, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			r, err := New(Config{DataDir: dataDir, FS: img.disk, Metastore: m})
			if err != nil {
				t.Fatal(err)
			}
			st, err := r.ConsumerState(bg, "orders", 0)
			if err != nil {
				t.Fatalf("%s: %v", img.label, err)
			}
			for o := int64(0); o < st.Frontier; o++ {
				if !img.acked[o] {
					t.Fatalf("%s: recovered frontier %d passes unacked offset %d (I9)", img.label, st.Frontier, o)
				}
			}
			for _, o := range st.AckedAhead {
				if !img.acked[o] {
					t.Fatalf("%s: recovered acked-ahead offset %d was never acked", img.label, o)
				}
			}
			if st.Frontier < img.durable {
				t.Fatalf("%s: recovered frontier %d below the last write-out's %d", img.label, st.Frontier, img.durable)
			}
			r.Close()
		}
		t.Logf("consumer crash states explored: %d (lying write-outs: %d), violations: 0", len(images), lie)
	})
}

// TestConsumer_DamagedFilesFallBackSafely: a corrupt slot falls back to
// the other; both corrupt fall back to consumer.offset; a consumer.offset
// above consumer.ahead's frontier or above the high watermark is rejected
// (docs/design.md R4, matrix rows 15 and 16).
func TestConsumer_DamagedFilesFallBackSafely(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 50))
	dir := filepath.Join(dataDir, "topics", "orders", "p00000")
	ahead, offset := filepath.Join(dir, wire.ConsumerAheadFileName), filepath.Join(dir, wire.ConsumerOffsetFileName)
	for _, f := range []int64{10, 20} { // two write-outs: both slots hold records
		acks := make([]int64, 0, f)
		for o := range f {
			acks = append(acks, o)
		}
		n.Ack(bg, "orders", 0, acks...)
		n.committer.tickAll(runItem)
		n.committer.writeOutAll(runItem)
	}
	n.reg.CloseLive(key("orders", 0)) // close writes both files out
	base := d.ProcessCrash()
	recovered := func(d *sim.Disk) int64 {
		t.Helper()
		m, _ := OpenLocalMetastore(d, dataDir)
		r, err := New(Config{DataDir: dataDir, FS: d, Metastore: m})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		st, err := r.ConsumerState(bg, "orders", 0)
		if err != nil {
			t.Fatal(err)
		}
		return st.Frontier
	}
	if f := recovered(base.ProcessCrash()); f != 20 {
		t.Fatalf("intact files: frontier %d, want 20", f)
	}
	b, _ := base.Contents(ahead)
	newest := 0
	if r0, err := wire.DecodeAheadSlot(b[:4096]); err == nil {
		if r1, err := wire.DecodeAheadSlot(b[4096:]); err != nil || r1.Sequence < r0.Sequence {
			newest = 0
		} else {
			newest = 1
		}
	}
	cases := []struct {
		name   string
		damage func(*sim.Disk)
		want   func(int64) bool
	}{
		{"newest slot bit flip: the other slot", func(d *sim.Disk) {
			d.Damage(ahead, int64(newest*4096+30), []byte{0xff})
		}, func(f int64) bool { return f <= 20 && f >= 10 }},
		{"both slots bad: consumer.offset", func(d *sim.Disk) {
			d.Damage(ahead, 30, []byte{0xff})
			d.Damage(ahead, 4096+30, []byte{0xff})
		}, func(f int64) bool { return f <= 20 }},
		{"consumer.offset raised by a bit flip: rejected", func(d *sim.Disk) {
			vfs.WriteFileAtomic(d, offset, []byte{0, 0, 0, 0, 0, 0, 0, 40})
		}, func(f int64) bool { return f == 20 }},
		{"consumer.offset above the high watermark, ahead gone: rejected", func(d *sim.Disk) {
			d.Remove(ahead)
			vfs.WriteFileAtomic(d, offset, []byte{0, 0, 0, 1, 0, 0, 0, 0})
		}, func(f int64) bool { return f == 0 }},
		{"short consumer.offset, ahead gone", func(d *sim.Disk) {
			d.Remove(ahead)
			vfs.WriteFileAtomic(d, offset, []byte{0, 0, 3})
		}, func(f int64) bool { return f == 0 }},
	}
	for _, c := range cases {
		img := base.ProcessCrash()
		c.damage(img)
		if f := recovered(img); !c.want(f) {
			t.Fatalf("%s: recovered frontier %d", c.name, f)
		}
	}
}

// TestConsumer_DeletedIncarnationNeverWritesIntoTheNewDirectory: acks of a
// deleted incarnation, still unwritten when the topic is recreated, never
// reach the recreated directory.
func TestConsumer_DeletedIncarnationNeverWritesIntoTheNewDirectory(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 10))
	if _, err := n.Ack(bg, "orders", 0, 0, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	// Deleted and recreated behind the node's back (it missed the purge).
	n.ms.DeleteTopic(bg, "orders")
	n.ms.CreateTopic(bg, "orders", 1, Retention{})
	n.background.Wait()
	n.Produce(bg, "orders", 0, recs("orders", 0, 100, 5)) // quarantines, opens fresh
	n.committer.tickAll(runItem)
	n.committer.writeOutAll(runItem)
	fresh := filepath.Join(dataDir, "topics", "orders", "p00000", wire.ConsumerAheadFileName)
	if ok, _ := vfs.Exists(d, fresh); ok {
		t.Fatal("an ack of the deleted incarnation was written into the recreated directory")
	}
	if st, _ := n.ConsumerState(bg, "orders", 0); st.Frontier != 0 {
		t.Fatalf("the recreated topic starts at frontier %d", st.Frontier)
	}
}

// TestConsumer_CloseWritesBothFilesOut: closing the log writes
// consumer.ahead out and levels consumer.offset, and closes the held file.
func TestConsumer_CloseWritesBothFilesOut(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 10))
	n.Ack(bg, "orders", 0, 0, 1, 2, 5)
	open := d.OpenFiles()
	n.reg.CloseLive(key("orders", 0))
	if d.OpenFiles() >= open {
		t.Fatalf("files open %d after close, %d before: the consumer file was not closed", d.OpenFiles(), open)
	}
	crashed := d.Crash(sim.CrashPlan{})
	b, err := crashed.Contents(filepath.Join(dataDir, "topics", "orders", "p00000", wire.ConsumerOffsetFileName))
	if v, _, _ := wire.DecodeOffsetFile(b); err != nil || v != 3 {
		t.Fatalf("consumer.offset after close = %v (%v), want 3", b, err)
	}
	m, _ := OpenLocalMetastore(crashed, dataDir)
	r, _ := New(Config{DataDir: dataDir, FS: crashed, Metastore: m})
	defer r.Close()
	if st, _ := r.ConsumerState(bg, "orders", 0); st.Frontier != 3 || fmt.Sprint(st.AckedAhead) != "[5]" {
		t.Fatalf("recovered after close and power loss: %+v", st)
	}
}

// TestConsumer_AReopenAfterAFailedCloseFsyncHoldsOnlyWhatTheMediaHolds:
// a close whose write-out of consumer.ahead fails its fdatasync leaves its
// record in pages the kernel marked clean without writing them (the
// fsyncgate lesson; vfs/sim does the same). The reopen's recovery must
// not take them for durable (its own fdatasync has nothing left to
// write): what the reopened progress holds survives a crash however long
// after. Found by the simulator: the acks came back at the reopen, were
// served for seconds, and a crash took them back, past the one write-out
// interval a crash may cost.
func TestConsumer_AReopenAfterAFailedCloseFsyncHoldsOnlyWhatTheMediaHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 1)
		n := startNode(t, d, Config{})
		makeTopic(t, n, "jobs", 1, 10)
		if _, err := n.Ack(bg, "jobs", 0, 0, 1, 2, 3, 4); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // write-outs, on the bubble's clock
		synctest.Wait()
		if _, err := n.Ack(bg, "jobs", 0, 5, 6, 7, 8, 9); err != nil {
			t.Fatal(err)
		}
		// No tick ran since (the clock stands still): the close's own
		// write-out is the one whose fdatasync fails.
		in := d.Inject(sim.Fault{Op: sim.OpSync, Path: filepath.Join(partitionPath("jobs", 0), wire.ConsumerAheadFileName), Err: syscall.EIO})
		if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
			t.Fatal(err)
		}
		in.Remove()
		reopened, err := n.ConsumerState(bg, "jobs", 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // nothing acked: nothing written
		synctest.Wait()
		crashed := startNode(t, d.Crash(sim.CrashPlan{}), Config{})
		after, err := crashed.ConsumerState(bg, "jobs", 0)
		if err != nil {
			t.Fatal(err)
		}
		if after.Frontier != reopened.Frontier || len(after.AckedAhead) != len(reopened.AckedAhead) {
			t.Fatalf("the reopen held frontier %d (%d acked ahead); a crash 5 s later left %d (%d): acks served as durable were lost",
				reopened.Frontier, len(reopened.AckedAhead), after.Frontier, len(after.AckedAhead))
		}
	})
}

// TestConsumer_AFailedTickNeverTurnsATornWindowIntoTheAnchor: a tick's
// write of the window slot that fails part-way (a short write) leaves the
// window torn; the next write-out must not sync it and flip it into the
// anchor on the strength of an earlier tick, or the ticks after write
// over the old anchor, the only whole record, and a close that fails
// then loses acks written out long before (found by the simulator's
// short writes of consumer.ahead).
func TestConsumer_AFailedTickNeverTurnsATornWindowIntoTheAnchor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 1)
		n := startNode(t, d, Config{})
		makeTopic(t, n, "jobs", 1, 10)
		if _, err := n.Ack(bg, "jobs", 0, 2, 3, 4); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1150 * time.Millisecond) // written out at the first tick, 100 ms in
		if _, err := n.Ack(bg, "jobs", 0, 5); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the tick at 1.2 s writes the window whole
		in := d.Inject(sim.Fault{Op: sim.OpWrite, Path: filepath.Join(partitionPath("jobs", 0), wire.ConsumerAheadFileName), Short: 100})
		if _, err := n.Ack(bg, "jobs", 0, 6); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // every tick tears a slot; a write-out comes at 2.1 s
		if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
			t.Fatal(err)
		}
		in.Remove()
		st, err := n.ConsumerState(bg, "jobs", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.AckedAhead) < 3 || fmt.Sprint(st.AckedAhead[:3]) != "[2 3 4]" {
			t.Fatalf("after a failed close: frontier %d, acked ahead %v; the acks of 2, 3 and 4, written out a second before the failures, were lost",
				st.Frontier, st.AckedAhead)
		}
	})
}

// TestConsumer_SetTooLargeForASlotDegradesSafely: an acked-ahead set that
// does not fit in a 4 KiB slot keeps the frontier exact and the lowest
// offsets that fit; after a crash nothing unacked is skipped, and the
// offsets that did not fit are merely redelivered.
func TestConsumer_SetTooLargeForASlotDegradesSafely(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 20000))
	var acks []int64
	for o := int64(1); o < 20000; o += 2 { // every odd offset: 10,000 acked ahead
		acks = append(acks, o)
	}
	if f, err := n.Ack(bg, "orders", 0, acks...); err != nil || f != 0 {
		t.Fatalf("ack = %d, %v", f, err)
	}
	n.Ack(bg, "orders", 0, 0) // frontier moves to 2
	n.committer.tickAll(runItem)
	n.committer.writeOutAll(runItem)
	crashed := d.Crash(sim.CrashPlan{})
	m, _ := OpenLocalMetastore(crashed, dataDir)
	r, err := New(Config{DataDir: dataDir, FS: crashed, Metastore: m})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st, err := r.ConsumerState(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Frontier != 2 {
		t.Fatalf("recovered frontier %d, want 2", st.Frontier)
	}
	if len(st.AckedAhead) == 0 || len(st.AckedAhead) >= len(acks) {
		t.Fatalf("recovered %d acked-ahead offsets of %d: want the part that fits", len(st.AckedAhead), len(acks))
	}
	for i, o := range st.AckedAhead {
		if o != int64(3+2*i) {
			t.Fatalf("acked-ahead offset %d is %d: not the lowest acked ones", i, o)
		}
	}
}

// TestConsumer_RejectedRecordsAreRepairedBeforeServing: a consumer.ahead
// slot or a consumer.offset rejected for a frontier above the high
// watermark is overwritten at recovery, so it cannot win later, once the
// high watermark has grown past it (I9).
func TestConsumer_RejectedRecordsAreRepairedBeforeServing(t *testing.T) {
	for _, damage := range []string{"slot", "offset"} {
		d := newTestDisk(t, 1)
		n := startNode(t, d, Config{})
		rec, _, _ := n.CreateTopic(bg, "orders", 1, Retention{})
		n.Produce(bg, "orders", 0, recs("orders", 0, 0, 300))
		n.Ack(bg, "orders", 0, 0, 1, 2)
		n.reg.CloseLive(key("orders", 0)) // frontier 3 written out
		dir := filepath.Join(dataDir, "topics", "orders", "p00000")
		switch damage {
		case "slot": // a newer slot claiming frontier 500, above the hwm of 300
			var slot [wire.AheadSlotSize]byte
			wire.EncodeAheadSlot(&slot, wire.AheadRecord{Sequence: 1000, Incarnation: rec.Incarnation, Frontier: 500})
			f, _ := d.OpenFile(filepath.Join(dir, wire.ConsumerAheadFileName), 2)
			f.WriteAt(slot[:], 0)
			f.WriteAt(slot[:], wire.AheadSlotSize) // both slots, the worst case
			f.Sync()
			f.Close()
			// consumer.offset (3) is then all that is left.
		case "offset":
			vfs.WriteFileAtomic(d, filepath.Join(dir, wire.ConsumerOffsetFileName), []byte{0, 0, 0, 0, 0, 0, 1, 0xf4})
		}
		st, err := n.ConsumerState(bg, "orders", 0)
		if err != nil || st.Frontier > 3 {
			t.Fatalf("%s: recovered %+v, %v: a frontier above the high watermark won", damage, st, err)
		}
		n.Produce(bg, "orders", 0, recs("orders", 0, 300, 300)) // the hwm passes 500
		n.reg.CloseLive(key("orders", 0))
		crashed := d.Crash(sim.CrashPlan{})
		m, _ := OpenLocalMetastore(crashed, dataDir)
		r, _ := New(Config{DataDir: dataDir, FS: crashed, Metastore: m})
		st, err = r.ConsumerState(bg, "orders", 0)
		r.Close()
		if err != nil || st.Frontier > 3 {
			t.Fatalf("%s: after the high watermark grew, recovered %+v, %v: the rejected record came back", damage, st, err)
		}
	}
}

// TestConsumer_AckedAheadSetIsBounded: an ack that would hold more than
// MaxAckedAhead offsets above the frontier is refused and changes nothing.
func TestConsumer_AckedAheadSetIsBounded(t *testing.T) {
	n := startNode(t, nil, Config{})
	n.CreateTopic(bg, "orders", 1, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 2*MaxAckedAhead+4))
	var odd []int64
	for o := int64(1); o <= 2*MaxAckedAhead-1; o += 2 {
		odd = append(odd, o)
	}
	if _, err := n.Ack(bg, "orders", 0, odd...); err != nil {
		t.Fatalf("acking exactly the bound: %v", err)
	}
	if _, err := n.Ack(bg, "orders", 0, 2*MaxAckedAhead+1); !errors.Is(err, ErrAckedAheadFull) {
		t.Fatalf("one past the bound: %v", err)
	}
	if f, err := n.Ack(bg, "orders", 0, 0); err != nil || f != 2 {
		t.Fatalf("acking the frontier still works: %d, %v", f, err)
	}
}
