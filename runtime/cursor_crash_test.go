package runtime

// A cursor's write-out cut short, or torn, then a crash: the cursor comes
// back where it stood before the write-out or where the write-out put it,
// never anywhere else (docs/design.md, "Fan-out cursors").

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// quietCursors keeps the cursor writer's loop out of a test: the test's
// own writeOutAll is the only write-out.
var quietCursors = Config{ConsumerOffsetCommitInterval: time.Hour}

// cursorCrashModes is every way a crash can treat the unsynced writes of a
// cursor file: dropped, kept, torn by sector (each combination of sectors
// kept, the new size kept, garbage in the sectors lost), with the
// namespace changes since the last directory sync lost or kept, and a
// crash of the process alone.
func cursorCrashModes() map[string]func(*sim.Disk) *sim.Disk {
	modes := map[string]func(*sim.Disk) *sim.Disk{
		"drop":    func(d *sim.Disk) *sim.Disk { return d.Crash(sim.CrashPlan{Data: sim.DropUnsynced}) },
		"keep":    func(d *sim.Disk) *sim.Disk { return d.Crash(sim.CrashPlan{Data: sim.KeepUnsynced}) },
		"process": func(d *sim.Disk) *sim.Disk { return d.ProcessCrash() },
		"drop, names kept": func(d *sim.Disk) *sim.Disk {
			return d.Crash(sim.CrashPlan{Data: sim.DropUnsynced, KeepNameOps: -1})
		},
		"keep, names kept": func(d *sim.Disk) *sim.Disk {
			return d.Crash(sim.CrashPlan{Data: sim.KeepUnsynced, KeepNameOps: -1})
		},
	}
	for _, sectors := range []bool{false, true} {
		for _, size := range []bool{false, true} {
			for _, garbage := range []bool{false, true} {
				plan := sim.CrashPlan{Data: sim.TearUnsynced, Garbage: garbage, Seed: 7,
					KeepSector:  func(string, int64) bool { return sectors },
					KeepNewSize: func(string) bool { return size }}
				modes[fmt.Sprintf("tear sectors=%v size=%v garbage=%v", sectors, size, garbage)] = func(d *sim.Disk) *sim.Disk { return d.Crash(plan) }
			}
		}
	}
	return modes
}

// TestCursor_AShortWriteOutThenACrashLeavesTheOldOrTheNewPosition: a
// write-out moving a cursor from one position to the next (forward and
// back) whose write reaches the file for only k of its bytes, for every k,
// then a crash in every mode: the cursor stands at the old position or the
// new one after the restart.
func TestCursor_AShortWriteOutThenACrashLeavesTheOldOrTheNewPosition(t *testing.T) {
	base := newTestDisk(t, 1)
	n := startNode(t, base, quietCursors)
	makeTopic(t, n, "orders", 1, 900)
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(partitionPath("orders", 0), "cursor.audit")
	modes := cursorCrashModes()
	names := make([]string, 0, len(modes))
	for name := range modes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, move := range [][2]int64{{255, 256}, {512, 511}} {
		from, to := move[0], move[1]
		for k := 1; ; k++ {
			d := base.Crash(sim.CrashPlan{})
			n := startNode(t, d, quietCursors)
			if err := n.CommitCursor(bg, "orders", "audit", 0, from); err != nil {
				t.Fatal(err)
			}
			n.cursors.writeOutAll()
			if err := n.CommitCursor(bg, "orders", "audit", 0, to); err != nil {
				t.Fatal(err)
			}
			writeLen := 0
			d.SetHook(func(c sim.Call) error {
				if c.Op == sim.OpWrite && c.Path == path {
					writeLen = c.Len
				}
				return nil
			})
			fault := d.Inject(sim.Fault{Op: sim.OpWrite, Path: path, Nth: 1, Short: k})
			n.cursors.writeOutAll()
			fault.Remove()
			d.SetHook(nil)
			if writeLen == 0 {
				t.Fatalf("%d -> %d: the write-out wrote nothing to %s", from, to, path)
			}
			if k >= writeLen {
				n.Close()
				break
			}
			for _, mode := range names {
				img := modes[mode](d)
				m := startNode(t, img, quietCursors)
				pos, err := m.Cursor(bg, "orders", "audit")
				if err != nil {
					t.Fatalf("%d -> %d, %d of %d bytes written, crash %s: %v", from, to, k, writeLen, mode, err)
				}
				if got := pos[0].Position; got != from && got != to {
					b, _ := img.Contents(path)
					t.Errorf("%d -> %d, %d of %d bytes written, crash %s: cursor at %d, want %d or %d (file %x)", from, to, k, writeLen, mode, got, from, to, b)
				}
				m.Close()
			}
			n.Close()
		}
	}
}

// cursorAt255 is a node's disk, closed, with topic orders (900 records)
// and cursor audit at 255; with legacy its file is in the older 8-byte
// format.
func cursorAt255(t *testing.T, legacy bool) (*sim.Disk, string) {
	t.Helper()
	d := newTestDisk(t, 1)
	n := startNode(t, d, quietCursors)
	makeTopic(t, n, "orders", 1, 900)
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if err := n.CommitCursor(bg, "orders", "audit", 0, 255); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(partitionPath("orders", 0), "cursor.audit")
	if legacy {
		old, _ := wire.EncodeOffsetFile(255)
		if err := vfs.WriteFileAtomic(d, path, old[:]); err != nil {
			t.Fatal(err)
		}
	}
	return d, path
}

// TestCursor_ACrashAtEveryFileCallOfAWriteOut: a write-out moving a
// cursor from 255 to 256, in place (two slots) and as the upgrade of an
// older-format file (a whole-file replace), with the power lost before
// each of its file calls and after the last, in every crash mode: the
// cursor comes back at 255 or 256.
func TestCursor_ACrashAtEveryFileCallOfAWriteOut(t *testing.T) {
	modes := cursorCrashModes()
	for _, legacy := range []bool{false, true} {
		base, path := cursorAt255(t, legacy)
		dir := filepath.Dir(path)
		for i := 0; ; i++ {
			d := base.Crash(sim.CrashPlan{})
			n := startNode(t, d, quietCursors)
			if err := n.CommitCursor(bg, "orders", "audit", 0, 256); err != nil {
				t.Fatal(err)
			}
			images := map[string]*sim.Disk{}
			var calls []string
			d.SetHook(func(c sim.Call) error {
				if c.Path != dir && !strings.HasPrefix(c.Path, dir+"/") {
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
			n.cursors.writeOutAll()
			d.SetHook(nil)
			last := len(images) == 0 // the crash comes after the last call
			if last {
				for mode, crash := range modes {
					images[mode] = crash(d)
				}
			}
			for mode, img := range images {
				m := startNode(t, img, quietCursors)
				pos, err := m.Cursor(bg, "orders", "audit")
				if err != nil {
					t.Fatalf("legacy %v, crash %s before call %d of %v: %v", legacy, mode, i, calls, err)
				}
				if got := pos[0].Position; got != 255 && got != 256 {
					b, _ := img.Contents(path)
					t.Errorf("legacy %v, crash %s before call %d of %v: cursor at %d, want 255 or 256 (file %x)", legacy, mode, i, calls, got, b)
				}
				m.Close()
			}
			n.Close()
			if last {
				if legacy && !slices.Contains(calls, "rename cursor-new.audit") {
					t.Fatalf("the upgrade's write-out made no rename: %v", calls)
				}
				t.Logf("legacy %v: %d file calls: %v", legacy, len(calls), calls)
				break
			}
		}
	}
}

// TestCursor_AnOlderFormatFileIsReadThenUpgraded: a cursor file of the
// older 8-byte format is read for its position; the next write-out
// replaces it with the two-slot format, and the write-out after that
// goes in place, into the other slot.
func TestCursor_AnOlderFormatFileIsReadThenUpgraded(t *testing.T) {
	d, path := cursorAt255(t, true)
	n := startNode(t, d, quietCursors)
	pos, err := n.Cursor(bg, "orders", "audit")
	if err != nil || pos[0].Position != 255 {
		t.Fatalf("an older-format file holding 255: %v, %v", pos, err)
	}
	n.cursors.writeOutAll()
	b, _ := d.Contents(path)
	st, err := wire.DecodeCursorFile(b)
	if err != nil || st.Legacy || st.Slot.Position != 255 || st.Index != 0 || len(b) != wire.CursorSlotSize {
		t.Fatalf("after the upgrade: file %x decodes as %+v, %v; want slot 0 alone holding 255", b, st, err)
	}
	if err := n.CommitCursor(bg, "orders", "audit", 0, 300); err != nil {
		t.Fatal(err)
	}
	var renames int
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRename || c.Op == sim.OpSyncDir {
			renames++
		}
		return nil
	})
	n.cursors.writeOutAll()
	d.SetHook(nil)
	b, _ = d.Contents(path)
	st, err = wire.DecodeCursorFile(b)
	if err != nil || st.Slot.Position != 300 || st.Index != 1 || renames != 0 {
		t.Fatalf("the next write-out: file decodes as %+v, %v, with %d renames or directory syncs; want slot 1 holding 300 in place", st, err, renames)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, d, quietCursors)
	if pos, err := n.Cursor(bg, "orders", "audit"); err != nil || pos[0].Position != 300 {
		t.Fatalf("after a restart: %v, %v; want 300", pos, err)
	}
}

// TestCursor_ADamagedFileStepsBackToTheFirstRecord: a cursor file with no
// valid slot (garbage in both, a torn first write, a file too long) is
// read as the partition's first record, never a position past it; one
// damaged slot leaves the other's position. The next write-out replaces
// a damaged file whole.
func TestCursor_ADamagedFileStepsBackToTheFirstRecord(t *testing.T) {
	slot := func(seq uint64, pos int64) []byte {
		b, err := wire.EncodeCursorSlot(wire.CursorSlot{Sequence: seq, Position: pos})
		if err != nil {
			t.Fatal(err)
		}
		return b[:]
	}
	twoSlots := func(a, b []byte) []byte {
		out := make([]byte, wire.CursorSlotStride+len(b))
		copy(out, a)
		copy(out[wire.CursorSlotStride:], b)
		return out
	}
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*151 + 7)
		}
		return b
	}
	flipped := slot(9, 256)
	flipped[17] ^= 0x10
	for _, c := range []struct {
		name string
		file []byte
		want int64
	}{
		{"garbage in both slots", twoSlots(garbage(wire.CursorSlotSize), garbage(wire.CursorSlotSize)), 0},
		{"a torn first slot", slot(1, 255)[:13], 0},
		{"8 bytes of a torn slot", slot(1, 255)[:8], 0},
		{"a bit flipped in the only slot", twoSlots(flipped, nil), 0},
		{"longer than two slots", append(twoSlots(slot(3, 255), slot(4, 256)), 0), 0},
		{"a legacy value past the high watermark", func() []byte { b, _ := wire.EncodeOffsetFile(5000); return b[:] }(), 0},
		{"a slot past the high watermark", twoSlots(slot(3, 255), slot(4, 5000)), 0},
		{"the newer slot damaged", twoSlots(slot(3, 255), flipped), 255},
		{"the older slot damaged", twoSlots(flipped, slot(10, 256)), 256},
		{"a sequence with no next", twoSlots(slot(math.MaxUint64, 255), nil), 255},
	} {
		d, path := cursorAt255(t, false)
		if err := vfs.WriteFileAtomic(d, path, c.file); err != nil {
			t.Fatal(err)
		}
		n := startNode(t, d, quietCursors)
		pos, err := n.Cursor(bg, "orders", "audit")
		if err != nil || pos[0].Position != c.want {
			t.Fatalf("%s: %v, %v; want %d", c.name, pos, err, c.want)
		}
		if err := n.CommitCursor(bg, "orders", "audit", 0, 400); err != nil {
			t.Fatal(err)
		}
		n.cursors.writeOutAll()
		b, _ := d.Contents(path)
		if st, err := wire.DecodeCursorFile(b); err != nil || st.Slot.Position != 400 {
			t.Fatalf("%s: after a write-out of 400 the file decodes as %+v, %v", c.name, st, err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
