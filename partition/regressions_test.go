package partition

import (
	"errors"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Regressions found in review; each named for what it pins.

// A background write that keeps failing is retried once per drain
// interval, not in a spin, and appends behind it are refused past a bound.
func TestRegression_FailedBackgroundWriteDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := testOptions(d)
		opts.flush = defaultFlushPolicy
		opts.flush.drainRecords = 1
		l := openLog(t, opts)
		defer l.Close()
		in := d.Inject(sim.Fault{Op: sim.OpWrite, Sticky: true, Nth: 1, Err: syscall.ENOSPC})
		if _, err := l.Append(bg, records(1, 0, 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(bg, records(1, 1, 1)); err != nil {
			t.Fatal(err)
		}
		<-time.After(time.Second)
		synctest.Wait()
		if n := in.Fired(); n > 15 {
			t.Fatalf("%d failed writes in one second: the flusher spins", n)
		}
		in.Remove()
		if err := l.CommitDurable(bg); err != nil {
			t.Fatal(err)
		}
		if l.HighWatermark() != 2 {
			t.Fatalf("high watermark %d, want 2", l.HighWatermark())
		}
	})
}

// A CommitDurable that failed reports its failure once: the caller's retry
// of the same records is not failed again by its own discard.
func TestRegression_FailedCommitDoesNotFailItsRetry(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, testOptions(d))
	defer closeLog(t, l)
	l.Append(bg, records(1, 0, 2))
	d.Inject(sim.Fault{Op: sim.OpWrite, Nth: 1, Err: syscall.EIO})
	if err := l.CommitDurable(bg); !errors.Is(err, ErrCommitFailed) {
		t.Fatalf("commit with a failing write: %v", err)
	}
	if base, err := l.Append(bg, records(1, 0, 2)); err != nil || base != 0 {
		t.Fatalf("re-append = %d, %v", base, err)
	}
	if err := l.CommitDurable(bg); err != nil {
		t.Fatalf("the retry failed: %v", err)
	}
	checkExactlyOnce(t, "after retry", l, 1, 2)
}

// A short write leaves no bytes past the boundary: close cuts them, so the
// next open trusts the hwm file and finds no torn tail.
func TestRegression_ShortWriteIsCut(t *testing.T) {
	d := newDisk(t, 1)
	metrics := NewMetrics(prometheus.NewRegistry())
	opts := testOptions(d)
	opts.Metrics = metrics
	l := openLog(t, opts)
	l.Produce(bg, records(1, 0, 1))
	in := d.Inject(sim.Fault{Op: sim.OpWrite, Nth: 1, Sticky: true, Short: 20, Err: syscall.ENOSPC})
	if _, err := l.Produce(bg, records(1, 1, 1)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("short write: %v", err)
	}
	in.Remove()
	closeLog(t, l)
	r := openLog(t, opts)
	defer closeLog(t, r)
	if got := testutil.ToFloat64(metrics.tornTails); got != 0 {
		t.Fatalf("a torn tail after a clean close: the short write's bytes were left behind")
	}
	checkExactlyOnce(t, "after reopen", r, 1, 1)
}

// A damaged frame under valid ones is one gap, counted once.
func TestRegression_GapCountedOnce(t *testing.T) {
	d, pos := committedLog(t, 5)
	img := d.ProcessCrash()
	b := contentsOf(t, img, activeSeg)
	img.Damage(activeSeg, pos[2]+30, []byte{b[pos[2]+30] ^ 1})
	emptyHWM(t, img)
	metrics := NewMetrics(prometheus.NewRegistry())
	l := openLog(t, Options{FS: img, SegmentMaxBytes: 64 << 10, Metrics: metrics})
	defer closeLog(t, l)
	if got := testutil.ToFloat64(metrics.gapsRecorded); got != 1 {
		t.Fatalf("gaps recorded %v, want 1", got)
	}
}

// A panic in the middle of a sweep's unlinks loses no detached segment:
// the next sweep unlinks what is left.
func TestRegression_PanicInUnlinkKeepsSegmentsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := testOptions(d)
		opts.RetentionMaxAge = time.Hour
		l := openLog(t, opts)
		defer l.Close()
		for i := range 40 {
			if _, err := l.Produce(bg, records(1, int64(i*5), 5)); err != nil {
				t.Fatal(err)
			}
		}
		<-time.After(2 * time.Hour)
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpRemove {
				panic("unlink")
			}
			return nil
		})
		func() {
			defer func() { recover() }()
			l.Sweep(bg)
		}()
		d.SetHook(nil)
		if _, err := l.Sweep(bg); err != nil {
			t.Fatal(err)
		}
		entries, _ := d.ReadDir(testDir)
		segments := 0
		for _, e := range entries {
			if len(e.Name) == 24 {
				segments++
			}
		}
		if segments != 1 {
			t.Fatalf("%d segment files left after the retry, want only the active one", segments)
		}
	})
}

// TestEMFILE_TypedRetriableNoPoisonNoLeak: with the descriptor limit
// reached, a roll's create and a read's lazy open fail with EMFILE, the
// log is not poisoned, no descriptor leaks, and everything works once
// descriptors are free again (docs/durability.md row 30).
func TestEMFILE_TypedRetriableNoPoisonNoLeak(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d) // 4 KiB segments
	l := openLog(t, opts)
	defer func() { l.Close() }()
	for i := range 200 {
		if _, err := l.Produce(bg, records(1, int64(i*3), 3)); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	l = openLog(t, opts)
	base := d.OpenFiles()
	d.SetMaxOpenFiles(base) // no descriptor left
	_, err := l.Read(0, 10, 1<<20)
	if !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("read of a sealed segment at the limit: %v, want EMFILE", err)
	}
	// Fill the active segment until the next commit must roll.
	var commitErr error
	for i := 0; commitErr == nil && i < 100; i++ {
		_, commitErr = l.Produce(bg, records(1, int64(600+3*i), 3))
	}
	if !errors.Is(commitErr, syscall.EMFILE) || errors.Is(commitErr, ErrLogPoisoned) {
		t.Fatalf("commit whose roll cannot create a segment: %v, want EMFILE and no poison", commitErr)
	}
	if d.OpenFiles() != base {
		t.Fatalf("%d files open after the failures, %d before: a descriptor leaked", d.OpenFiles(), base)
	}
	d.SetMaxOpenFiles(0)
	hwm := l.HighWatermark()
	if base, err := l.Produce(bg, records(1, hwm, 3)); err != nil || base != hwm {
		t.Fatalf("commit once descriptors are free: %d, %v", base, err)
	}
	if res, err := l.Read(0, 10, 1<<20); err != nil || len(res.Records) != 10 {
		t.Fatalf("read once descriptors are free: %d records, %v", len(res.Records), err)
	}
}

// TestRetention_CrashMidSweepLeavesAContiguousSuffix: a power loss at any
// point of a sweep's unlinks leaves the oldest segments deleted and the
// rest whole, never a hole inside the retained range (matrix row 26).
func TestRetention_CrashMidSweepLeavesAContiguousSuffix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := testOptions(d)
		opts.RetentionMaxAge = time.Hour
		l := openLog(t, opts)
		defer func() { l.Close() }()
		for i := range 60 {
			if _, err := l.Produce(bg, records(1, int64(i*3), 3)); err != nil {
				t.Fatal(err)
			}
		}
		<-time.After(2 * time.Hour)
		var images []*sim.Disk
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpRemove || c.Op == sim.OpSyncDir {
				images = append(images, d.Crash(sim.CrashPlan{}), d.Crash(sim.CrashPlan{KeepNameOps: -1}))
			}
			return nil
		})
		if _, err := l.Sweep(bg); err != nil {
			t.Fatal(err)
		}
		d.SetHook(nil)
		if len(images) < 4 {
			t.Fatalf("only %d crash images: the sweep unlinked too little to test", len(images))
		}
		for i, img := range images {
			r, err := Open(testDir, Options{FS: img, SegmentMaxBytes: opts.SegmentMaxBytes})
			if err != nil {
				t.Fatalf("image %d: %v", i, err)
			}
			for off := r.StartOffset(); off < r.HighWatermark(); {
				res, err := r.Read(off, 1000, 1<<20)
				if err != nil {
					t.Fatalf("image %d: a hole at %d inside the retained range [%d, %d): %v", i, off, r.StartOffset(), r.HighWatermark(), err)
				}
				for _, rec := range res.Records {
					if seq := checkRecord(t, 1, rec); seq != rec.Offset {
						t.Fatalf("image %d: offset %d holds seq %d", i, rec.Offset, seq)
					}
				}
				off = res.Next
			}
			r.Close()
		}
	})
}
