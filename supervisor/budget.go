package supervisor

import (
	"errors"
	"fmt"
	"sort"
)

// ErrNoRoom: the registry holds its MaxOpen logs and every one of them is
// in use (a produce holds its gate, or its topic is busy opening or
// closing), so none could be closed to make room. Nothing was opened and
// nothing was harmed: retry shortly.
var ErrNoRoom = errors.New("supervisor: every open log is in use and the open-log budget is full")

// reserve takes one of the budget's slots for an open of key, closing
// the least recently used idle logs first while the budget is full. Every
// reserve that succeeds is paired with an install (which turns the slot
// into an entry) or an unreserve.
//
// A victim is closed only if its produce gate and its topic's guard are
// both free: they are taken with try-locks, which cannot wait, so the
// caller may hold key's gate (shared or exclusive) without breaking the
// lock order, and a log in use is never closed under its user. The close
// itself is every live close's: between two commits, hwm file written,
// consumer state settled (OnClose). A reader that holds the log without
// the gate meets ErrLogClosed and reopens it, as after idle eviction.
func (r *Registry) reserve(key Key) error {
	if r.maxOpen <= 0 {
		return nil
	}
	busy := map[Key]bool{}
	for {
		r.lockMap()
		if r.closed {
			r.unlockMap()
			return fmt.Errorf("%w: open %s/%d", ErrRegistryClosed, key.Topic, key.Partition)
		}
		if len(r.logs)+r.opening+r.closing < r.maxOpen {
			r.opening++
			r.unlockMap()
			return nil
		}
		victims := r.leastRecentlyUsedLocked(key, busy)
		r.unlockMap()
		evicted := false
		for _, v := range victims {
			if r.tryEvict(v) {
				evicted = true
				break
			}
			busy[v] = true
		}
		if !evicted {
			return fmt.Errorf("%w (%d open): open %s/%d", ErrNoRoom, r.maxOpen, key.Topic, key.Partition)
		}
	}
}

// unreserve gives back a slot reserve took and no log filled.
func (r *Registry) unreserve() {
	if r.maxOpen <= 0 {
		return
	}
	r.lockMap()
	r.opening--
	r.unlockMap()
}

// leastRecentlyUsedLocked lists the open logs other than key and the ones
// found busy, least recently used first. The caller holds the map lock.
func (r *Registry) leastRecentlyUsedLocked(key Key, busy map[Key]bool) []Key {
	type candidate struct {
		key      Key
		lastUsed int64
	}
	cands := make([]candidate, 0, len(r.logs))
	for k, e := range r.logs {
		if k != key && !busy[k] {
			cands = append(cands, candidate{k, e.lastUsed.Load()})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].lastUsed < cands[j].lastUsed })
	out := make([]Key, len(cands))
	for i, c := range cands {
		out[i] = c.key
	}
	return out
}

// tryEvict closes key's log if nobody is using it, and reports whether
// its slot is free now (closed here, or by someone else meanwhile).
func (r *Registry) tryEvict(key Key) bool {
	gate := r.Gate(key)
	if !gate.tryLock() {
		return false
	}
	defer gate.Unlock()
	guard := r.Guard(key.Topic)
	if !guard.tryLock() {
		return false
	}
	defer guard.Unlock()
	r.lockMap()
	_, open := r.logs[key]
	r.unlockMap()
	if !open {
		return true
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
