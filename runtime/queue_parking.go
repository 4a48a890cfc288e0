package runtime

import (
	"sync"
	"sync/atomic"
)

// parking is the queue consumers of one topic waiting for a record
// (docs/design.md, "Wake-ups for waiting readers"). The topic's logs call
// wake through their wake notifier at every announcement (a commit, a
// close); a nack and a lease expiry call it too. wake costs one atomic
// load unless a consumer is parked, and wakes exactly one: the one parked
// longest. A woken consumer that leases something passes the wake-up on,
// so a burst of records drains through every parked consumer in turn.
//
// Invariants, under mu: waiters holds each parked consumer's channel
// once, oldest first; count == len(waiters).
type parking struct {
	count atomic.Int32
	rr    atomic.Uint64 // where the next any-partition consume starts

	mu      sync.Mutex
	waiters []chan struct{}
}

// park registers a consumer about to check for records; its channel
// receives the wake-up meant for it, even one sent during the check.
func (p *parking) park() chan struct{} {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	p.waiters = append(p.waiters, ch)
	p.count.Add(1)
	p.mu.Unlock()
	return ch
}

// unpark takes ch out, if a wake-up has not already.
func (p *parking) unpark(ch chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, w := range p.waiters {
		if w == ch {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			p.count.Add(-1)
			return
		}
	}
}

// wake wakes the consumer parked longest, if any.
func (p *parking) wake() {
	if p.count.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiters) == 0 {
		return
	}
	ch := p.waiters[0]
	p.waiters = p.waiters[1:]
	p.count.Add(-1)
	ch <- struct{}{}
}
