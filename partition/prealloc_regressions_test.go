package partition

import (
	"bytes"
	"path/filepath"
	goruntime "runtime"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
)

// TestPrealloc_CrashRecoveryKeepsTheActiveSegmentsAge: after a crash,
// the active segment recovered from disk ages from its last write (its
// mtime), as TestRetention_RecoveredSegmentAgesFromMtime says for a clean
// close: the crash path's truncates (the give-back of reserved blocks on
// a clean tail, the trim of zeros written ahead) keep the mtime, and the
// age is read before them.
func TestPrealloc_CrashRecoveryKeepsTheActiveSegmentsAge(t *testing.T) {
	for _, c := range []struct {
		name string
		busy bool // commits 1 ms apart: zeros written ahead, trimmed by recovery
	}{
		{"clean tail, nothing prepared", false},
		{"zeros written ahead", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const seed = 61
				d := newDisk(t, seed)
				opts := retentionOptions(d, time.Hour)
				opts.SegmentMaxBytes = 1 << 20
				l := openLog(t, opts)
				for i := range 5 {
					if c.busy {
						<-time.After(time.Millisecond)
					} else {
						<-time.After(2 * preallocBusyWithin)
					}
					if _, err := l.Produce(bg, records(seed, int64(i), 1)); err != nil {
						t.Fatal(err)
					}
				}
				crashed := d.Crash(sim.CrashPlan{Data: sim.KeepUnsynced}) // everything was synced anyway
				closeLog(t, l)

				advanceBy(30 * time.Minute)
				opts.FS = crashed
				r := openLog(t, opts)
				defer closeLog(t, r)
				advanceBy(31 * time.Minute) // the records are 61 minutes old
				res, err := r.Sweep(bg)
				if err != nil || !res.Rotated || res.DeletedRecords != 5 {
					t.Fatalf("sweep 61 minutes after the last write (31 after the reopen): %+v, %v; want the active segment rotated and its 5 records deleted", res, err)
				}
			})
		})
	}
}

// TestPrealloc_ACloseKeepsTheActiveSegmentsAge: a busy partition left
// idle is closed 30 minutes after its last write (an idle eviction); the
// space it prepared is given back without moving the file's mtime, so the
// next open ages the segment from its last write and its records do not
// outlive the retention bound.
func TestPrealloc_ACloseKeepsTheActiveSegmentsAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seed = 62
		d := newDisk(t, seed)
		opts := retentionOptions(d, time.Hour)
		opts.SegmentMaxBytes = 1 << 20
		l := openLog(t, opts)
		for i := range 5 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, records(seed, int64(i), 1)); err != nil {
				t.Fatal(err)
			}
		}
		advanceBy(30 * time.Minute)
		closeLog(t, l)
		r := openLog(t, opts)
		defer closeLog(t, r)
		advanceBy(31 * time.Minute)
		res, err := r.Sweep(bg)
		if err != nil || !res.Rotated || res.DeletedRecords != 5 {
			t.Fatalf("sweep 61 minutes after the last write (31 after the close): %+v, %v; want the active segment rotated and its 5 records deleted", res, err)
		}
	})
}

// TestCommit_ReadBackIsBoundedAfterManyAppends: records appended and not
// yet committed are drained and written in the background, frame after
// frame (the segment does not roll while they are uncommitted), so the
// commit's read-back may cover any number of frames: it reads them through
// a bounded buffer, never one of the whole range.
func TestCommit_ReadBackIsBoundedAfterManyAppends(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "log"), Options{noPrealloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := []Record{{Value: bytes.Repeat([]byte{'v'}, 1<<20)}} // one drain, one frame, per append
	for range 40 {
		if _, err := l.Append(bg, rec); err != nil {
			t.Fatal(err)
		}
	}
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	if err := l.CommitDurable(bg); err != nil {
		t.Fatal(err)
	}
	goruntime.ReadMemStats(&after)
	// At most the read-back window (readBackWindow, 8 MiB) and change:
	// never a buffer of the whole 40 MiB range.
	if got := after.TotalAlloc - before.TotalAlloc; got > readBackWindow+2<<20 {
		t.Fatalf("the commit of 40 background-written 1 MiB frames allocated %d MiB; want the read-back through a window of %d MiB", got>>20, readBackWindow>>20)
	}
}

// TestPrealloc_ARollAfterIdleKeepsTheSealedSegmentsAge: a busy partition
// goes idle holding zeros written ahead; its next write, 50 minutes on,
// rolls the segment by age. After a restart a sealed segment's last write
// is its mtime, which giving the zeros back (when idle, or at the roll)
// kept, so its records do not outlive the retention bound.
func TestPrealloc_ARollAfterIdleKeepsTheSealedSegmentsAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seed = 63
		d := newDisk(t, seed)
		opts := retentionOptions(d, time.Hour)
		opts.SegmentMaxBytes = 1 << 20
		opts.MaxSegmentAge = 30 * time.Minute
		l := openLog(t, opts)
		for i := range 5 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, records(seed, int64(i), 1)); err != nil {
				t.Fatal(err)
			}
		}
		advanceBy(50 * time.Minute)
		if _, err := l.Produce(bg, records(seed, 5, 1)); err != nil { // rolls: the segment is 50 minutes old
			t.Fatal(err)
		}
		if n := len(l.view.Load().sealed); n != 1 {
			t.Fatalf("%d sealed segments, want 1", n)
		}
		closeLog(t, l)
		r := openLog(t, opts)
		defer closeLog(t, r)
		advanceBy(11 * time.Minute) // records 0-4 are 61 minutes old
		res, err := r.Sweep(bg)
		if err != nil || res.DeletedSegments != 1 || res.DeletedRecords != 5 {
			t.Fatalf("sweep 61 minutes after records 0-4 were written: %+v, %v; want their sealed segment deleted", res, err)
		}
	})
}

// TestPrealloc_AFailedTrimDoesNotFailTheCommit: a roll due by age is done
// by the next frame write; when it cannot give back the zeros written
// ahead (a failed truncate) the roll waits and the commit lands: the zeros
// are an optimization, and a failed step never fails a commit.
func TestPrealloc_AFailedTrimDoesNotFailTheCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := preallocOptions(d)
		opts.MaxSegmentAge = time.Minute
		l := openLog(t, opts)
		defer closeLog(t, l)
		for i := range 5 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, records(1, int64(i), 1)); err != nil {
				t.Fatal(err)
			}
		}
		if segmentSize(t, d, l) <= l.view.Load().active.size {
			t.Fatal("no zeros ahead of the frames")
		}
		advanceBy(2 * time.Minute)
		in := d.Inject(sim.Fault{Op: sim.OpTruncate, Path: testDir + "/*.log", Nth: 1, Err: syscall.EIO})
		defer in.Remove()
		if _, err := l.Produce(bg, records(1, 5, 1)); err != nil {
			t.Fatalf("a commit whose segment roll had zeros to trim, and the trim failed: %v", err)
		}
	})
}
