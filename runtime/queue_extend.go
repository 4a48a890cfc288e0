package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MaxLease bounds a lease extension (ExtendLease): 12 hours, as a
// consume's lease_ms in the HTTP API.
const MaxLease = 12 * time.Hour

// ErrBadLease: a lease extension asked for less than a millisecond or
// more than MaxLease.
var ErrBadLease = errors.New("runtime: lease out of range")

// ExtendLease moves the deadline of records leased under leaseID to now
// + lease (docs/design.md, "Queue consume"), for slow work that must not
// give its records back: NATS's in-progress ack, SQS's visibility change.
// Only records leased now under leaseID are extended: one acked, nacked,
// given back, or whose lease ran out (and may be another consumer's
// since) is passed over, as by a Nack. A shorter lease moves the deadline
// earlier. It returns how many were extended. The lease is from a
// millisecond to MaxLease (ErrBadLease). Leases stay in memory: a
// restart delivers every record not acked again, extended or not.
func (n *Node) ExtendLease(ctx context.Context, topic string, p int, leaseID uint64, leaseFor time.Duration, offsets ...int64) (int, error) {
	if leaseFor < time.Millisecond || leaseFor > MaxLease {
		return 0, fmt.Errorf("%w: %v, not from 1ms to %v", ErrBadLease, leaseFor, MaxLease)
	}
	q, err := n.leasesOf(ctx, topic, p)
	if q == nil || err != nil {
		return 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dropped {
		return 0, nil
	}
	now := time.Now()
	deadline := now.Add(leaseFor)
	extended := 0
	seen := make(map[int64]bool, len(offsets))
	for _, o := range offsets {
		if seen[o] {
			continue // a record once, as a nack counts it
		}
		seen[o] = true
		// Expired and not yet given back (the timer is on its way) is
		// expired: reclaim and the timer go by the same rule.
		if l, ok := q.leased[o]; ok && l.id == leaseID && now.Before(l.deadline) {
			q.leased[o] = lease{deadline: deadline, id: leaseID}
			extended++
		}
	}
	if extended > 0 {
		// The timer is set for the earliest deadline: a shorter lease
		// moves it earlier (without this it would give the record back
		// late), a longer one later (a timer that fires early gives
		// nothing back and sets itself again, so this only saves a turn).
		q.arm(n.queues)
	}
	return extended, nil
}
