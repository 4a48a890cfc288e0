package partition

import (
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/narad-io/storage/vfs/sim"
)

// openCalls opens the test log and returns the file calls Open made.
func openCalls(t *testing.T, d *sim.Disk, opts Options) (*Log, []sim.Call) {
	t.Helper()
	var mu sync.Mutex
	var calls []sim.Call
	d.SetHook(func(c sim.Call) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
		return nil
	})
	l := openLog(t, opts)
	d.SetHook(nil)
	mu.Lock()
	defer mu.Unlock()
	return l, append([]sim.Call(nil), calls...)
}

// TestOpen_AnExistingLogIsListedAndItsActiveSegmentReadOnce: opening a
// log that exists (the open past the open-log budget) lists its directory
// without a stat of it first, stats its active segment once, and reads
// each byte of it once: the last frame's commit time (the floor of later
// commit times) is taken from the walk's read, not read again.
func TestOpen_AnExistingLogIsListedAndItsActiveSegmentReadOnce(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d)
	l := openLog(t, opts)
	for seq := int64(0); seq < 12; seq += 3 {
		if _, err := l.Produce(bg, records(1, seq, 3)); err != nil {
			t.Fatal(err)
		}
	}
	active := l.view.Load().active.path
	closeLog(t, l)

	l, calls := openCalls(t, d, opts)
	defer closeLog(t, l)
	stats, read := 0, map[int64]bool{}
	for _, c := range calls {
		switch {
		case c.Op == sim.OpStat && c.Path == filepath.Clean(testDir):
			t.Errorf("the log's directory stat'ed at open: %+v", c)
		case c.Op == sim.OpStat && c.Path == active:
			stats++
		case c.Op == sim.OpRead && c.Path == active:
			for b := c.Off; b < c.Off+int64(c.Len); b++ {
				if read[b] {
					t.Fatalf("byte %d of the active segment read twice at open (%+v); calls: %+v", b, c, calls)
				}
				read[b] = true
			}
		}
	}
	if stats != 1 {
		t.Errorf("active segment stat'ed %d times at open, want 1; calls: %+v", stats, calls)
	}
	if len(read) == 0 {
		t.Errorf("active segment not read at open; calls: %+v", calls)
	}
}

// TestCommitTimes_NeverDecreaseAcrossAReopenPastATornTail: when the
// active segment's last valid frame does not end the file (a torn tail
// after it), the walk does not take that frame's commit time, and records
// committed after the reopen under a clock that went back still come no
// earlier than it.
func TestCommitTimes_NeverDecreaseAcrossAReopenPastATornTail(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d)
	l := openLog(t, opts) // outside a bubble: today's clock
	if _, err := l.Produce(bg, records(1, 0, 3)); err != nil {
		t.Fatal(err)
	}
	active := l.view.Load().active
	size := active.size
	closeLog(t, l)
	if err := d.Damage(active.path, size, []byte{0xca, 0xfe, 1, 2, 3}); err != nil { // a frame's first bytes, torn
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) { // the bubble's clock starts in 2000
		l := openLog(t, opts)
		defer closeLog(t, l)
		if _, err := l.Produce(bg, records(1, 3, 2)); err != nil {
			t.Fatal(err)
		}
		recs, _ := readAll(t, l)
		if len(recs) != 5 {
			t.Fatalf("%d records read back, want 5", len(recs))
		}
		checkNonDecreasing(t, recs)
	})
}
