package simulation

import "time"

// slotHistory remembers when an ack last took a partition's acked-ahead
// set from over keptAhead offsets to within it (the frontier caught up
// with acks a consumer.ahead slot could not all hold). Until a write-out
// records the new frontier, the last durable record is the one from
// before: its slot held only the set's lowest offsets, so a crash (or a
// close whose write-out fails) may lose the acks above the old frontier
// however long ago they returned (docs/durability.md, "The simulator":
// acks above the frontier while the set held more than 1,000 offsets).
//
// Invariant: shrankLow is the frontier just before the ack at shrankAt.
type slotHistory struct {
	shrankAt  time.Time
	shrankLow int64
}

// frontierOf is the model's frontier of p: its lowest offset not acked.
func frontierOf(p *partModel) int64 {
	low := int64(0)
	for p.isAcked(low) {
		low++
	}
	return low
}

// ackedNow takes acks that returned now into p, and notes in its
// slotHistory an ack that shrank a set over keptAhead to within it.
func (p *partModel) ackedNow(offsets []int64) {
	beforeAhead, beforeLow := aheadOf(p), frontierOf(p)
	now := time.Now()
	for _, o := range offsets {
		if !p.isAcked(o) {
			p.acked[o] = now
		}
		delete(p.leases, o)
	}
	if beforeAhead > keptAhead && aheadOf(p) <= keptAhead {
		p.slots.shrankAt, p.slots.shrankLow = now, beforeLow
	}
}

// mayLoseOverSlot reports whether a crash (or a failed close) at at may
// lose the ack of o though it returned long before: the set held more
// than keptAhead offsets above a frontier under o within ackWindow before
// at, so the last write-out may hold only the set's lowest.
func (p *partModel) mayLoseOverSlot(o int64, at time.Time) bool {
	return o >= p.slots.shrankLow && p.slots.shrankAt.After(at.Add(-ackWindow))
}
