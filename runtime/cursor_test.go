package runtime

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Tests of docs/design.md, "Fan-out cursors".

func offsetsOf(r CursorRead) string {
	var out []int64
	for _, rec := range r.Records {
		out = append(out, rec.Offset)
	}
	return fmt.Sprint(out)
}

// TestCursor_ReadsInOrderAndResumesAfterARestart: an earliest cursor
// reads each partition in order from its first record and advances; a
// read that does not advance leaves it; a latest cursor sees only what
// commits after it was made; positions and lag are reported; after a
// restart each cursor resumes exactly where it stood; each position file
// is an engine file (0600).
func TestCursor_ReadsInOrderAndResumesAfterARestart(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	makeTopic(t, n, "orders", 2, 5)
	if created, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil || !created {
		t.Fatalf("create: %v, %v", created, err)
	}
	if created, err := n.CreateCursor(bg, "orders", "audit", CursorLatest); err != nil || created {
		t.Fatalf("create again: %v, %v; want no change", created, err)
	}
	if _, err := n.CreateCursor(bg, "orders", "tail", CursorLatest); err != nil {
		t.Fatal(err)
	}
	if r, err := n.ReadCursor(bg, "orders", "audit", 0, 3, 1<<20, false); err != nil || offsetsOf(r) != "[0 1 2]" {
		t.Fatalf("peek: %s, %v", offsetsOf(r), err)
	}
	if r, err := n.ReadCursor(bg, "orders", "audit", 0, 3, 1<<20, true); err != nil || offsetsOf(r) != "[0 1 2]" {
		t.Fatalf("read: %s, %v", offsetsOf(r), err)
	}
	if r, err := n.ReadCursor(bg, "orders", "tail", 1, 10, 1<<20, true); err != nil || len(r.Records) != 0 {
		t.Fatalf("latest cursor before any new commit: %s, %v", offsetsOf(r), err)
	}
	if _, err := n.Produce(bg, "orders", 1, recs("orders", 1, 5, 1)); err != nil {
		t.Fatal(err)
	}
	if r, err := n.ReadCursor(bg, "orders", "tail", 1, 10, 1<<20, true); err != nil || offsetsOf(r) != "[5]" {
		t.Fatalf("latest cursor after a commit: %s, %v", offsetsOf(r), err)
	}
	pos, err := n.Cursor(bg, "orders", "audit")
	if err != nil || fmt.Sprint(pos) != "[{0 3 5 2} {1 0 6 6}]" {
		t.Fatalf("positions %v, %v", pos, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := d.Stat(filepath.Join(partitionPath("orders", 0), "cursor.audit"))
	if err != nil || info.Mode.Perm() != vfs.FileMode {
		t.Fatalf("position file: %+v, %v; want mode %v", info, err, vfs.FileMode)
	}
	n = startNode(t, d, Config{})
	if r, err := n.ReadCursor(bg, "orders", "audit", 0, 10, 1<<20, true); err != nil || offsetsOf(r) != "[3 4]" {
		t.Fatalf("after the restart: %s, %v; want [3 4]", offsetsOf(r), err)
	}
	if r, err := n.ReadCursor(bg, "orders", "tail", 1, 10, 1<<20, true); err != nil || len(r.Records) != 0 {
		t.Fatalf("latest cursor after the restart: %s, %v; want nothing", offsetsOf(r), err)
	}
	if _, err := n.ReadCursor(bg, "orders", "nobody", 0, 10, 1<<20, true); !errors.Is(err, ErrCursorNotFound) {
		t.Fatalf("a cursor never made: %v", err)
	}
}

// TestCursor_AWrittenOutPositionSurvivesACrash: a position is durable
// once written out (the committer's cadence); a crash before steps the
// cursor back to the last written-out position, never forward.
func TestCursor_AWrittenOutPositionSurvivesACrash(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	makeTopic(t, n, "orders", 1, 10)
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	before := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	if _, err := n.ReadCursor(bg, "orders", "audit", 0, 4, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	n.cursors.writeOutAll()
	written := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	if _, err := n.ReadCursor(bg, "orders", "audit", 0, 3, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	unwritten := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
	for _, c := range []struct {
		img  *sim.Disk
		want int64
	}{{before, 0}, {written, 4}, {unwritten, 4}} {
		m := startNode(t, c.img, Config{})
		pos, err := m.Cursor(bg, "orders", "audit")
		if err != nil || len(pos) != 1 || pos[0].Position != c.want {
			t.Fatalf("after a crash: %v, %v; want position %d", pos, err, c.want)
		}
		m.Close()
	}
}

// TestCursor_DamagedFrameSteppedOverCountedAndLogged: a cursor read
// meeting a damaged sealed frame steps over it, never serving it, counts
// its records in narad_fanout_child_dropped_messages{cursor} (exposed at
// zero from the start for a cursor on disk) and logs a warning; the
// cursor passes it.
func TestCursor_DamagedFrameSteppedOverCountedAndLogged(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	makeTopic(t, n, "jobs", 1, 0)
	for i := range 3 {
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
	if err := d.Damage(seg, frameStart(t, d, seg, 1)+40, []byte("rot")); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	core, logs := observer.New(zapcore.WarnLevel)
	n = startNode(t, d, Config{Registerer: reg, Logger: zap.New(core)})
	if got := series(t, reg, "narad_fanout_child_dropped_messages"); got != "cursor=audit topic=jobs 0\n" {
		t.Fatalf("narad_fanout_child_dropped_messages at start: %q", got)
	}
	var offsets []int64
	skipped := int64(0)
	for {
		r, err := n.ReadCursor(bg, "jobs", "audit", 0, 100, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		skipped += r.Skipped
		if len(r.Records) == 0 {
			break
		}
		for _, rec := range r.Records {
			offsets = append(offsets, rec.Offset)
		}
	}
	if fmt.Sprint(offsets) != "[0 1 2 3 4 10 11 12 13 14]" || skipped != 5 {
		t.Fatalf("read %v, skipped %d; want the first and third frames, 5 skipped", offsets, skipped)
	}
	if got := series(t, reg, "narad_fanout_child_dropped_messages"); got != "cursor=audit topic=jobs 5\n" {
		t.Fatalf("narad_fanout_child_dropped_messages %q, want 5", got)
	}
	if w := logs.FilterMessage("fan-out cursor stepped over permanently unreadable records").All(); len(w) != 1 {
		t.Fatalf("%d warnings, want 1", len(w))
	}
	if pos, err := n.Cursor(bg, "jobs", "audit"); err != nil || pos[0].Position != 15 {
		t.Fatalf("position %v, %v; want 15, past the damage", pos, err)
	}
}

// TestCursor_GoesWithItsIncarnationAndItsDelete: a delete and recreate of
// the topic drops its cursors (the new incarnation has none); a cursor
// deleted is gone from every partition, files included.
func TestCursor_GoesWithItsIncarnationAndItsDelete(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	makeTopic(t, n, "orders", 2, 3)
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ReadCursor(bg, "orders", "audit", 0, 2, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	makeTopic(t, n, "orders", 2, 1)
	n.cursors.writeOutAll() // nothing of the old incarnation is written into the new one
	if _, err := n.Cursor(bg, "orders", "audit"); !errors.Is(err, ErrCursorNotFound) {
		t.Fatalf("the old incarnation's cursor in the new one: %v", err)
	}
	if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if r, err := n.ReadCursor(bg, "orders", "audit", 0, 10, 1<<20, true); err != nil || offsetsOf(r) != "[0]" {
		t.Fatalf("the new incarnation's cursor: %s, %v; want [0]", offsetsOf(r), err)
	}
	if err := n.DeleteCursor(bg, "orders", "audit"); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		if _, err := d.Stat(filepath.Join(partitionPath("orders", p), "cursor.audit")); err == nil {
			t.Fatalf("partition %d keeps the deleted cursor's file", p)
		}
	}
	if err := n.DeleteCursor(bg, "orders", "audit"); !errors.Is(err, ErrCursorNotFound) {
		t.Fatalf("delete again: %v", err)
	}
	if _, err := n.CreateCursor(bg, "orders", "bad/name", CursorEarliest); !errors.Is(err, wire.ErrBadName) {
		t.Fatalf("a bad cursor name: %v", err)
	}
}

// TestCursor_PositionsAreWrittenOutOnTheCommittersCadence: with nothing
// but time passing, the cursor_writer loop writes a moved position out
// within the commit interval: a crash after that keeps it.
func TestCursor_PositionsAreWrittenOutOnTheCommittersCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 1)
		n := startNode(t, d, Config{ConsumerOffsetCommitInterval: time.Second})
		makeTopic(t, n, "orders", 1, 10)
		if _, err := n.CreateCursor(bg, "orders", "audit", CursorEarliest); err != nil {
			t.Fatal(err)
		}
		if _, err := n.ReadCursor(bg, "orders", "audit", 0, 6, 1<<20, true); err != nil {
			t.Fatal(err)
		}
		advanceBy(2 * time.Second)
		img := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
		m := startNode(t, img, Config{})
		if pos, err := m.Cursor(bg, "orders", "audit"); err != nil || pos[0].Position != 6 {
			t.Fatalf("after a crash two intervals later: %v, %v; want position 6", pos, err)
		}
	})
}
