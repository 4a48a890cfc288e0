package simulation

import (
	"sync"
	"testing/synctest"
	"time"
)

// Exact replay (docs/durability.md, "The simulator"): a run's file calls
// repeat, in order, from (seed, run), because nothing the node does runs
// beside the workload, or beside another background task, in an order the
// Go scheduler picks:
//
//   - Before every call into the node (retryBusy, settle) the bubble comes
//     to rest (synctest.Wait): every goroutine the last call or a timer
//     woke has run until it blocks.
//   - The metastore's change feed, which starts a recheck goroutine per
//     change, is delivered between operations, one change at a time, never
//     beside the call that made it (feed).
//   - Every operation lands on an instant of its own, a nanosecond after
//     the last (settle), and every delay of the node and of the workload is
//     a whole number of microseconds: timers two operations armed fall due
//     together only if the operations were a multiple of 1,000 apart and
//     the workload's odd pauses between them sum to the difference of the
//     two delays to the nanosecond. (One consume of every partition arms a
//     lease expiry per partition at one deadline; an expiry works in
//     memory only, and a queue's own.)
//   - The background loops' intervals are distinct primes of microseconds
//     (sim.go), so loops one start arms never tick together.
//   - The node's own choices among partitions go in key order, and
//     runtime.TestOptions.Serial has Start and Close work one partition at
//     a time.
//
// An operation that runs callers at once (concurrent producers, long
// polls, waiting consumes) starts them one at a time (goSettled), each
// parked, or done, before the next begins, so their file calls come in an
// order the run chose, never the scheduler; and whatever wakes them goes
// through a gate (gate.go), so a woken caller's calls come between the
// same two of the node's goroutines' calls every time.

// feed holds the metastore's change notifications until the workload
// delivers them (runtime.LocalMetastore.SetFeedDelivery).
//
// Invariants, under mu: queued holds every notification handed over and
// not yet run, oldest first.
type feed struct {
	mu     sync.Mutex
	queued []func()
}

func (f *feed) deliver(notify func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queued = append(f.queued, notify)
}

// next takes the oldest notification not yet run, or nil.
func (f *feed) next() func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queued) == 0 {
		return nil
	}
	n := f.queued[0]
	f.queued = f.queued[1:]
	return n
}

// settle lets the bubble come to rest before the workload's next call into
// the node: every goroutine woken since has run until it blocks, each
// change notification is delivered with its recheck run to its end, and
// the clock moves on one nanosecond, so the next call lands on an instant
// of its own.
func (r *runner) settle() {
	synctest.Wait()
	for n := r.feed.next(); n != nil; n = r.feed.next() {
		n()
		synctest.Wait()
	}
	time.Sleep(time.Nanosecond)
	synctest.Wait()
}

// goSettled starts f in a goroutine of the bubble and returns once the
// bubble is at rest again: f has run until it blocks (or returned), with
// everything it woke. Callers started one after another so start, and
// make their calls, in the order the run drew them.
func goSettled(f func()) {
	go callerFrame(f)
	synctest.Wait()
}
