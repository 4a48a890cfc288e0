package partition

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
)

// Tests of docs/design.md, "Wake-ups for waiting readers".

// isClosed reports whether c is closed, without waiting.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// "Wake-ups for waiting readers": a log announces a high-watermark advance,
// a Wake and its close, through NotifyC and the wake notifier alike;
// buffering or flushing a record, or a commit with nothing new, announces
// nothing.
func TestNotify_AnnouncesAdvanceWakeAndCloseOnly(t *testing.T) {
	tests := []struct {
		name     string
		act      func(t *testing.T, l *Log)
		announce bool
	}{
		{"produce advances the high watermark", func(t *testing.T, l *Log) {
			if _, err := l.Produce(bg, records(1, 2, 3)); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"commit of appended records advances the high watermark", func(t *testing.T, l *Log) {
			if _, err := l.Append(bg, records(1, 2, 3)); err != nil {
				t.Fatal(err)
			}
			if err := l.CommitDurable(bg); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"wake", func(t *testing.T, l *Log) { l.Wake() }, true},
		{"close", func(t *testing.T, l *Log) { closeLog(t, l) }, true},
		{"append alone", func(t *testing.T, l *Log) {
			if _, err := l.Append(bg, records(1, 2, 3)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"background drain and sync", func(t *testing.T, l *Log) {
			if _, err := l.Append(bg, records(1, 2, 3)); err != nil {
				t.Fatal(err)
			}
			advanceBy(100 * time.Millisecond)
			advanceBy(time.Second)
		}, false},
		{"size-triggered drain", func(t *testing.T, l *Log) {
			if _, err := l.Append(bg, records(1, 2, 1000)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"commit with nothing new", func(t *testing.T, l *Log) {
			if err := l.CommitDurable(bg); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := sim.NewDisk(10)
				l := openLog(t, testOptions(d))
				defer l.Close()
				if _, err := l.Produce(bg, records(1, 0, 2)); err != nil {
					t.Fatal(err)
				}
				var wakes atomic.Int64
				l.SetWakeNotifier(func() { wakes.Add(1) })
				c := l.NotifyC()
				if isClosed(c) {
					t.Fatal("NotifyC is closed before anything happened")
				}

				tc.act(t, l)
				synctest.Wait()

				if got := isClosed(c); got != tc.announce {
					t.Fatalf("NotifyC closed: %v, want %v", got, tc.announce)
				}
				wantWakes := int64(0)
				if tc.announce {
					wantWakes = 1
				}
				if got := wakes.Load(); got != wantWakes {
					t.Fatalf("wake notifier called %d times, want %d", got, wantWakes)
				}
				// A waiter fetches the channel again after a wake-up: the
				// fresh one is open, except on a closed log, where it is
				// closed for good.
				again := l.NotifyC()
				if tc.announce && again == c {
					t.Fatal("NotifyC returned the channel the announcement closed")
				}
				if got, want := isClosed(again), tc.name == "close"; got != want {
					t.Fatalf("NotifyC after the announcement closed: %v, want %v", got, want)
				}
			})
		})
	}
}

// "Wake-ups for waiting readers": SetWakeNotifier's function is called at
// every announcement and no other time; nil removes it.
func TestNotify_WakeNotifierCalledOnAdvanceWakeAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(11)
		l := openLog(t, testOptions(d))
		var wakes atomic.Int64
		l.SetWakeNotifier(func() { wakes.Add(1) })
		expect := func(step string, want int64) {
			t.Helper()
			synctest.Wait()
			if got := wakes.Load(); got != want {
				t.Fatalf("after %s: wake notifier called %d times, want %d", step, got, want)
			}
		}
		if _, err := l.Produce(bg, records(1, 0, 2)); err != nil {
			t.Fatal(err)
		}
		expect("produce", 1)
		if _, err := l.Append(bg, records(1, 2, 2)); err != nil {
			t.Fatal(err)
		}
		advanceBy(2 * time.Second)
		expect("append, drain and sync", 1)
		if err := l.CommitDurable(bg); err != nil {
			t.Fatal(err)
		}
		expect("commit", 2)
		l.Wake()
		expect("wake", 3)
		l.SetWakeNotifier(nil)
		l.Wake()
		expect("wake with the notifier removed", 3)
		l.SetWakeNotifier(func() { wakes.Add(10) })
		closeLog(t, l)
		expect("close", 13)
	})
}

// "Wake-ups for waiting readers": a waiter fetches the channel before its
// last check for data, so a commit that lands between the check and the
// wait still wakes it.
func TestNotify_CommitBetweenCheckAndWaitIsNotMissed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(12)
		l := openLog(t, testOptions(d))
		defer closeLog(t, l)

		c := l.NotifyC()
		if hwm := l.HighWatermark(); hwm != 0 {
			t.Fatalf("high watermark %d, want 0", hwm)
		}
		// The commit lands after the check and before the wait.
		if _, err := l.Produce(bg, records(1, 0, 1)); err != nil {
			t.Fatal(err)
		}
		if !isClosed(c) {
			t.Fatal("a waiter that checked before the commit would sleep through it")
		}

		// Many waiters against many small commits: every waiter that runs
		// the pattern sees the last commit. One that misses a wake-up stays
		// blocked, which synctest.Wait exposes.
		const waiters, commits = 8, 200
		target := int64(1 + commits)
		var done sync.WaitGroup
		var finished atomic.Int64
		for range waiters {
			done.Go(func() {
				for {
					c := l.NotifyC()
					if l.HighWatermark() >= target {
						finished.Add(1)
						return
					}
					<-c
				}
			})
		}
		for i := range commits {
			if _, err := l.Produce(bg, records(1, int64(1+i), 1)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if n := finished.Load(); n != waiters {
			t.Errorf("%d of %d waiters saw the last commit; the others missed a wake-up", n, waiters)
		}
		l.Wake() // let any stuck waiter re-check, so the test ends either way
		done.Wait()
	})
}

// "Wake-ups for waiting readers": when nobody fetched the channel since the
// last broadcast, a broadcast does nothing and allocates nothing (so
// appends stay allocation-free). The log has no wake notifier.
func TestNotify_BroadcastNobodyFetchedAllocatesNothing(t *testing.T) {
	d := sim.NewDisk(13)
	l := openLog(t, testOptions(d))
	defer closeLog(t, l)

	if allocs := testing.AllocsPerRun(1000, l.Wake); allocs != 0 {
		t.Fatalf("Wake with nobody waiting allocates %v times per call, want 0", allocs)
	}
	c := l.NotifyC()
	l.Wake()
	if !isClosed(c) {
		t.Fatal("Wake did not close the fetched channel")
	}
	if allocs := testing.AllocsPerRun(1000, l.Wake); allocs != 0 {
		t.Fatalf("Wake after a broadcast with nobody fetching since allocates %v times per call, want 0", allocs)
	}
}
