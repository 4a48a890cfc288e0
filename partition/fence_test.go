package partition

import (
	"errors"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
)

// TestRetention_CloseWaitsForTheSweepsUnlinks: a close (and the reopen
// that follows it) landing while a sweep is unlinking the segments it
// detached waits for the unlinks, so the reopen never lists a detached
// segment and the late unlink never deletes a segment the new log serves
// (node-level durability, item 4). Before the fence, the reopened log
// listed the segment, the unlink removed it, and reads of the retained
// range failed with an I/O error until the next sweep.
func TestRetention_CloseWaitsForTheSweepsUnlinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := testOptions(d)
		opts.RetentionMaxAge = time.Hour
		l := openLog(t, opts)
		for i := range 60 {
			if _, err := l.Produce(bg, records(1, int64(i*3), 3)); err != nil {
				t.Fatal(err)
			}
		}
		<-time.After(2 * time.Hour)
		if _, err := l.Produce(bg, records(1, 180, 3)); err != nil { // the active segment stays young
			t.Fatal(err)
		}

		var reopened atomic.Pointer[Log]
		reopenDone := make(chan error, 1)
		var once sync.Once
		var raced bool
		d.SetHook(func(c sim.Call) error {
			if c.Op != sim.OpRemove || path.Dir(c.Path) != testDir {
				return nil
			}
			once.Do(func() {
				// The detach is decided and the first unlink is about to
				// run: close the log and reopen it now.
				go func() {
					l.Close()
					r, err := Open(testDir, opts)
					reopened.Store(r)
					reopenDone <- err
				}()
				synctest.Wait() // the close is parked at the fence, or it got through
				select {
				case <-reopenDone:
					raced = true
				default:
				}
			})
			return nil
		})
		res, err := l.Sweep(bg)
		if err != nil || res.DeletedSegments == 0 {
			t.Fatalf("sweep: %+v, %v", res, err)
		}
		if !raced {
			if err := <-reopenDone; err != nil {
				t.Fatal(err)
			}
		}
		d.SetHook(nil)
		r := reopened.Load()
		if r == nil {
			t.Fatal("no reopened log")
		}
		defer closeLog(t, r)
		if raced {
			t.Errorf("the log closed and reopened while its sweep was still unlinking")
		}
		for off := r.StartOffset(); off < r.HighWatermark(); {
			res, err := r.Read(off, 1000, 1<<20)
			if err != nil {
				t.Fatalf("reopened log [%d, %d): read at %d: %v", r.StartOffset(), r.HighWatermark(), off, err)
			}
			off = res.Next
		}
	})
}

// TestFlusher_FailedBackgroundRollBacksOff: a background drain whose roll
// cannot create the next segment (EMFILE) retries once per drain
// interval, not in a hot loop (node-level durability, item 7: the roll's
// failure set no retry time, so the timer came due at once, forever). In
// a synctest bubble time stands still while a goroutine spins, so more
// than a few attempts at one instant is the spin.
func TestFlusher_FailedBackgroundRollBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := testOptions(d)
		opts.MaxSegmentAge = time.Minute
		l := openLog(t, opts)
		defer closeLog(t, l)
		if _, err := l.Produce(bg, records(1, 0, 3)); err != nil {
			t.Fatal(err)
		}
		<-time.After(2 * time.Minute) // the active segment is due to roll
		d.SetMaxOpenFiles(d.OpenFiles())
		next := segmentPathOf(t, 3)
		var mu sync.Mutex
		attempts := map[time.Time]int{}
		spun := false
		d.SetHook(func(c sim.Call) error {
			if c.Op != sim.OpOpen || c.Path != next {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			attempts[now]++
			if attempts[now] > 3 && !spun {
				spun = true
				d.SetMaxOpenFiles(0) // let the loop end
			}
			return nil
		})
		if _, err := l.Append(bg, records(1, 3, 1)); err != nil {
			t.Fatal(err)
		}
		advanceBy(time.Second)
		mu.Lock()
		if spun {
			t.Fatalf("the flusher retried a failed roll in a hot loop: %v", attempts)
		}
		if n := len(attempts); n < 5 || n > 11 {
			t.Errorf("%d roll attempts in a second, want about one per 100 ms drain interval", n)
		}
		mu.Unlock()
		d.SetHook(nil)
		d.SetMaxOpenFiles(0)
		if err := l.CommitDurable(bg); err != nil {
			t.Fatalf("commit once descriptors are free: %v", err)
		}
		if got := l.HighWatermark(); got != 4 {
			t.Fatalf("high watermark %d, want 4", got)
		}
		if _, err := l.Read(3, 1, 1<<20); err != nil && !errors.Is(err, ErrBeyondHighWatermark) {
			t.Fatal(err)
		}
	})
}
