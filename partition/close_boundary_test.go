package partition

import (
	"testing"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// The close of a log writes its boundary to the hwm file only when the
// file does not hold it already (docs/design.md, "High watermark and
// hidden tail"): a log opened on an exact boundary and not committed to
// since closes without a write or an fsync (an idle victim of the
// open-log budget costs its close no fdatasync), and one committed to
// writes and syncs the new boundary.

// changes are the calls of a close that change the disk or wait for it.
var changes = []sim.Op{sim.OpWrite, sim.OpTruncate, sim.OpSync, sim.OpSyncDir, sim.OpAllocate, sim.OpRemove, sim.OpRename, sim.OpMkdir}

func changesIn(calls *diskCalls) []sim.Call {
	var out []sim.Call
	for _, c := range calls.all() {
		for _, op := range changes {
			if c.Op == op {
				out = append(out, c)
			}
		}
	}
	return out
}

func TestClose_ABoundaryOnDiskAlreadyIsNotWrittenOrSyncedAgain(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d)
	l := openLog(t, opts)
	if _, err := l.Produce(bg, records(1, 0, 3)); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)

	l = openLog(t, opts) // the boundary on disk is exact: trusted
	if recs, _ := readAll(t, l); len(recs) != 3 {
		t.Fatalf("read back %d records, want 3", len(recs))
	}
	var calls diskCalls
	d.SetHook(calls.hook)
	closeLog(t, l)
	d.SetHook(nil)
	if got := changesIn(&calls); len(got) != 0 {
		t.Fatalf("the close of a log read but not committed to since its boundary was written made %v; want no write and no fsync", got)
	}
	if got := contentsOf(t, d, testDir+"/"+wire.HWMFileName); string(got) != string([]byte{0, 0, 0, 0, 0, 0, 0, 3}) {
		t.Fatalf("hwm file after the close: %v, want 3", got)
	}
}

func TestClose_AfterACommitWritesAndSyncsTheNewBoundary(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d)
	l := openLog(t, opts)
	if _, err := l.Produce(bg, records(1, 0, 3)); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)

	l = openLog(t, opts)
	if _, err := l.Produce(bg, records(1, 3, 2)); err != nil {
		t.Fatal(err)
	}
	hwmPath := testDir + "/" + wire.HWMFileName
	var calls diskCalls
	d.SetHook(calls.hook)
	closeLog(t, l)
	d.SetHook(nil)
	if got := calls.ops(hwmPath, sim.OpWrite, sim.OpSync); len(got) != 2 || got[0] != sim.OpWrite || got[1] != sim.OpSync {
		t.Fatalf("the close after a commit made %v on the hwm file; want a write, then an fsync", got)
	}
	crashed := d.Crash(sim.CrashPlan{}) // only what the fsync made durable
	if got := contentsOf(t, crashed, hwmPath); string(got) != string([]byte{0, 0, 0, 0, 0, 0, 0, 5}) {
		t.Fatalf("hwm file on the media after the close: %v, want 5", got)
	}
	r := openLog(t, Options{FS: crashed, SegmentMaxBytes: opts.SegmentMaxBytes})
	defer closeLog(t, r)
	if r.HighWatermark() != 5 {
		t.Fatalf("reopened at %d, want 5", r.HighWatermark())
	}
}
