package runtime

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// TestCursor_AFailedWriteOutThenAMoveBackIsWrittenOut: a write-out of 600
// whose fdatasync fails, then a commit back to 255 (the last position
// written out): the file may hold 600 (the page cache keeps the failed
// write, marked clean), so the move back is written out, and a clean
// close and restart, or a process crash, find 255, never a position past
// the last commit.
func TestCursor_AFailedWriteOutThenAMoveBackIsWrittenOut(t *testing.T) {
	d, path := cursorAt255(t, false)
	n := startNode(t, d, quietCursors)
	if _, err := n.Cursor(bg, "orders", "audit"); err != nil {
		t.Fatal(err)
	}
	n.cursors.writeOutAll() // written = 255 (a load writes out once)
	if err := n.CommitCursor(bg, "orders", "audit", 0, 600); err != nil {
		t.Fatal(err)
	}
	fault := d.Inject(sim.Fault{Op: sim.OpSync, Path: path, Nth: 1, Err: syscall.EIO})
	n.cursors.writeOutAll()
	if fault.Fired() != 1 {
		t.Fatalf("the write-out's sync was not failed")
	}
	fault.Remove()
	if err := n.CommitCursor(bg, "orders", "audit", 0, 255); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for mode, img := range map[string]*sim.Disk{"restart": d, "process crash": d.ProcessCrash()} {
		m := startNode(t, img, quietCursors)
		pos, err := m.Cursor(bg, "orders", "audit")
		if err != nil || pos[0].Position != 255 {
			t.Errorf("%s: %v, %v; want 255, the last position committed", mode, pos, err)
		}
		m.Close()
	}
}

// TestCursor_ACrashDuringALatestCreateIsMadeAgain: a create from latest
// cut by a crash before each file call in the partition's directory (and
// after the last), in every mode, torn data with the names kept too: the
// create made again leaves the cursor at the high watermark, never at
// the first record a torn file would read as.
func TestCursor_ACrashDuringALatestCreateIsMadeAgain(t *testing.T) {
	base := newTestDisk(t, 1)
	n := startNode(t, base, quietCursors)
	makeTopic(t, n, "orders", 1, 900)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	dir := partitionPath("orders", 0)
	modes := cursorCrashModes()
	for _, size := range []bool{false, true} {
		for _, garbage := range []bool{false, true} {
			plan := sim.CrashPlan{Data: sim.TearUnsynced, Garbage: garbage, Seed: 7, KeepNameOps: -1,
				KeepSector:  func(string, int64) bool { return false },
				KeepNewSize: func(string) bool { return size }}
			modes[fmt.Sprintf("tear size=%v garbage=%v, names kept", size, garbage)] = func(d *sim.Disk) *sim.Disk { return d.Crash(plan) }
		}
	}
	for i := 0; ; i++ {
		d := base.Crash(sim.CrashPlan{})
		n := startNode(t, d, quietCursors)
		images := map[string]*sim.Disk{}
		var calls []string
		d.SetHook(func(c sim.Call) error {
			if !strings.HasPrefix(c.Path, dir+"/") && c.Path != dir {
				return nil
			}
			if len(calls) == i {
				for mode, crash := range modes {
					images[mode] = crash(d)
				}
			}
			calls = append(calls, fmt.Sprintf("%s %s", c.Op, filepath.Base(c.Path)))
			return nil
		})
		if _, err := n.CreateCursor(bg, "orders", "audit", CursorLatest); err != nil {
			t.Fatal(err)
		}
		d.SetHook(nil)
		n.Close()
		last := len(images) == 0
		if last {
			for mode, crash := range modes {
				images[mode] = crash(d)
			}
		}
		for mode, img := range images {
			m := startNode(t, img, quietCursors)
			if _, err := m.CreateCursor(bg, "orders", "audit", CursorLatest); err != nil {
				t.Fatal(err)
			}
			pos, err := m.Cursor(bg, "orders", "audit")
			if err != nil || pos[0].Position != pos[0].HighWatermark {
				t.Errorf("crash %s before call %d of %v, then the create again: %+v, %v; want the high watermark", mode, i, calls, pos, err)
			}
			m.Close()
		}
		if last {
			break
		}
	}
}

// TestCursor_ASequenceThatRunsOutInPlaceIsReplaced: a file whose newest
// sequence is one short of the largest: the write-out after the one that
// takes the largest must not wrap to 0 in the other slot and lose to it.
func TestCursor_ASequenceThatRunsOutInPlaceIsReplaced(t *testing.T) {
	d, path := cursorAt255(t, false)
	slot, err := wire.EncodeCursorSlot(wire.CursorSlot{Sequence: math.MaxUint64 - 1, Position: 255})
	if err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(d, path, slot[:]); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, d, quietCursors)
	for _, pos := range []int64{300, 200} {
		if err := n.CommitCursor(bg, "orders", "audit", 0, pos); err != nil {
			t.Fatal(err)
		}
		n.cursors.writeOutAll()
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	m := startNode(t, d, quietCursors)
	defer m.Close()
	if pos, err := m.Cursor(bg, "orders", "audit"); err != nil || pos[0].Position != 200 {
		b, _ := d.Contents(path)
		t.Fatalf("after write-outs of 300 then 200: %v, %v; want 200 (file %x)", pos, err, b)
	}
}
