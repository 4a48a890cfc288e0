package runtime

import (
	"sync"
	"sync/atomic"
)

// parking is the queue consumers of one topic waiting for a record
// (docs/design.md, "Wake-ups for waiting readers"). Each partition's log
// calls wake with its partition through its wake notifier at every
// announcement (a commit, a close); a nack, a lease expiry, a freed lease
// slot and a failed consume's give-back call it too. wake costs one atomic
// load unless a consumer is parked, and wakes exactly one: the one parked
// longest among those that consume that partition (or any). A woken
// consumer that returns without leasing passes the wake-up on; one that
// leased passes one on for each partition it leased from, so a burst of
// records drains through every parked consumer in turn.
//
// Invariants, under mu: waiters holds each parked consumer once, oldest
// first; count == len(waiters); a waiter taken out by wake has exactly
// one partition in its channel.
type parking struct {
	count atomic.Int32
	rr    atomic.Uint64 // where the next any-partition consume starts

	mu      sync.Mutex
	waiters []*waiter
}

// waiter is one parked consume.
type waiter struct {
	partition int      // the partition it consumes, or AnyPartition
	ch        chan int // the partition it was woken for
}

func (w *waiter) takes(p int) bool {
	return w.partition == AnyPartition || p == AnyPartition || w.partition == p
}

// park registers a consume about to check for records, at the back (or,
// parking again after a wake-up that found nothing, at the front, keeping
// its turn); its channel receives the wake-up meant for it, even one sent
// during the check.
func (p *parking) park(partition int, front bool) *waiter {
	w := &waiter{partition: partition, ch: make(chan int, 1)}
	p.mu.Lock()
	if front {
		p.waiters = append([]*waiter{w}, p.waiters...)
	} else {
		p.waiters = append(p.waiters, w)
	}
	p.count.Add(1)
	p.mu.Unlock()
	return w
}

// unpark takes w out. If a wake-up took it out first, it reports the
// partition it was woken for: a consume returning without records passes
// that wake-up on.
func (p *parking) unpark(w *waiter) (woken bool, partition int) {
	p.mu.Lock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			p.count.Add(-1)
			p.mu.Unlock()
			return false, 0
		}
	}
	p.mu.Unlock()
	return true, <-w.ch
}

// wake wakes the consume parked longest that takes partition p (any
// partition's, with AnyPartition), if one is parked.
func (p *parking) wake(partition int) {
	if p.count.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, w := range p.waiters {
		if w.takes(partition) {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			p.count.Add(-1)
			w.ch <- partition
			return
		}
	}
}

// wakeAll wakes every parked consume (the topic was deleted, the node is
// closing).
func (p *parking) wakeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.waiters {
		w.ch <- AnyPartition
	}
	p.count.Add(-int32(len(p.waiters)))
	p.waiters = nil
}
