package supervisor

import "time"

// recency is the registry's open logs in the order of their last use,
// the least recently used first: the budget's victims come off its
// front, idle eviction reads its front, and a use moves a log to its
// back. Every step is O(1) and runs under the map lock, which every use
// (Registry.Open's lookup) already takes: the list adds a few pointer
// writes to that critical section, and no lock.
//
// It is an exact LRU list (an intrusive doubly linked list through the
// entries) rather than CLOCK: CLOCK would let a use set a bit without
// the map lock, but the lookup takes that lock anyway, and CLOCK's
// choice (the first log whose bit is clear, past a hand that moves on
// every open) would be only an approximation of least recently used,
// which the replayed simulation and the model test would then have to
// reproduce bit for bit.
//
// Invariants, under the registry's map lock:
//   - Every entry of Registry.logs is in the list exactly once, and
//     nothing else is: linked at its install, unlinked at its drop.
//   - The list is in the order of the calls that used its logs (the
//     order they took the map lock), whatever the clock says: the
//     choice of a victim is a function of the order of calls, never of
//     the clock's resolution, a map's order or the scheduler beyond the
//     order of calls.
//   - lastUsed never decreases from front to back: each stamp is the
//     monotonic clock's reading, raised to the newest stamp given out,
//     when its entry moves to the back. So the logs idle since a cutoff
//     are a prefix of the list.
type recency struct {
	front, back *entry
	epoch       time.Time // stamps are the monotonic nanoseconds since
	newest      int64     // the newest stamp given out
}

func newRecency() recency { return recency{epoch: time.Now()} }

// stamp is the clock's reading now, never below a stamp given out before.
func (q *recency) stamp() int64 {
	q.newest = max(q.newest, int64(time.Since(q.epoch)))
	return q.newest
}

// since is t as a stamp: every log whose lastUsed is below it was last
// used before t.
func (q *recency) since(t time.Time) int64 { return int64(t.Sub(q.epoch)) }

// pushBack links e, not in the list, as the most recently used.
func (q *recency) pushBack(e *entry) {
	e.lastUsed = q.stamp()
	e.prev, e.next = q.back, nil
	if q.back != nil {
		q.back.next = e
	} else {
		q.front = e
	}
	q.back = e
}

// remove unlinks e, which is in the list.
func (q *recency) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		q.front = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		q.back = e.prev
	}
	e.prev, e.next = nil, nil
}

// touch makes e, which is in the list, the most recently used.
func (q *recency) touch(e *entry) {
	q.remove(e)
	q.pushBack(e)
}
