package supervisor

import (
	"errors"
	"fmt"
)

// ErrNoRoom: the registry holds its MaxOpen logs and every one of them is
// in use (a produce holds its gate, or its topic is busy opening or
// closing), so none could be closed to make room. Nothing was opened and
// nothing was harmed: retry shortly.
var ErrNoRoom = errors.New("supervisor: every open log is in use and the open-log budget is full")

// Reserve takes the slot of the log Open is opening under this guard,
// closing the least recently used idle logs first while the budget is
// full. Open's function calls it once the open is known to be valid (the
// topic and partition exist, the incarnation matches) and right before it
// makes the log, so a refused call closes nothing and concurrent opens of
// one partition take one slot. Without a budget it does nothing.
//
// The victims come off the front of the order of last use (recency.go),
// so a choice costs O(1), not a sort of what is open. A log found in use
// (its gate or its topic's guard held, or Evictable says no) moves to the
// back, as used now: no later try, this open's or another's, meets it
// again before every other log, and each log open when the budget was
// found full is tried at most once before ErrNoRoom.
//
// A victim is closed only if nothing uses it: its produce gate and its
// topic's guard are taken with try-locks, which cannot wait, so the lock
// order holds whatever the caller holds (a victim of the caller's own
// topic needs no guard: the caller holds it). The close itself is every
// live close's: between two commits, hwm file written, consumer state
// settled (OnClose). A reader that holds the log without the gate meets
// ErrLogClosed and reopens it, as after idle eviction.
func (t *GuardedTopic) Reserve() error {
	r := t.r
	if r.maxOpen <= 0 || t.reserved {
		return nil
	}
	key := t.opening
	skipped, tries := 0, -1
	for {
		r.lockMap()
		if r.closed {
			r.unlockMap()
			return fmt.Errorf("%w: open %s/%d", ErrRegistryClosed, key.Topic, key.Partition)
		}
		if len(r.logs)+r.opening+r.closing < r.maxOpen {
			r.opening++
			t.reserved = true
			r.unlockMap()
			return nil
		}
		if tries < 0 {
			tries = len(r.logs) // each log open now is tried at most once
		}
		victim := r.lru.front
		r.unlockMap()
		if victim == nil || skipped >= tries {
			return fmt.Errorf("%w (%d open): open %s/%d", ErrNoRoom, r.maxOpen, key.Topic, key.Partition)
		}
		if r.tryEvict(victim.key, t.topic) {
			continue
		}
		r.lockMap()
		if r.logs[victim.key] == victim {
			// In use: it counts as used now, so the next try, and the
			// next open's, is another log.
			r.lru.touch(victim)
			skipped++
		}
		r.unlockMap()
	}
}

// unreserve gives back a slot Reserve took and no log filled.
func (t *GuardedTopic) unreserve() {
	if !t.reserved {
		return
	}
	t.r.lockMap()
	t.r.opening--
	t.r.unlockMap()
	t.reserved = false
}

// tryEvict closes key's log if nobody is using it (and Evictable allows),
// and reports whether it did. heldTopic is the topic whose guard the
// caller holds. It closes nothing once the registry is fenced (Close):
// the node closes every log itself then.
func (r *Registry) tryEvict(key Key, heldTopic string) bool {
	gate := r.Gate(key)
	if !gate.tryLock() {
		return false
	}
	defer gate.Unlock()
	if key.Topic != heldTopic {
		guard := r.Guard(key.Topic)
		if !guard.tryLock() {
			return false
		}
		defer guard.Unlock()
	}
	r.lockMap()
	e, open := r.logs[key]
	fenced := r.closed
	r.unlockMap()
	if !open || fenced || (r.evictable != nil && !r.evictable(key, e.log)) {
		return false
	}
	err := r.dropAndClose(key)
	r.evictions.Add(1)
	if r.onEvict != nil {
		r.onEvict(key, err)
	}
	return true
}

// MaxOpen is the budget of open logs; 0 is none.
func (r *Registry) MaxOpen() int { return r.maxOpen }

// Evictions counts the logs closed to make room within the budget.
func (r *Registry) Evictions() uint64 { return r.evictions.Load() }
