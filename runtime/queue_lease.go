package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"go.uber.org/zap"
)

// errConsumerGone: the consumer state a lease began with was settled or
// dropped under it (its log closed); the lease starts over.
var errConsumerGone = errors.New("consumer state settled under a lease")

// leaseFrom leases up to max records, and about maxBytes, of one
// partition: first the ones given back, lowest first, then the ones never
// handed out.
func (n *Node) leaseFrom(ctx context.Context, key supervisor.Key, max, maxBytes int, lease time.Duration) ([]LeasedRecord, error) {
	for attempt := 0; ; attempt++ {
		c, _, err := n.consumerOf(ctx, key.Topic, key.Partition)
		if err != nil {
			return nil, err
		}
		q := n.queues.of(key, c)
		out, err := n.leaseLocked(q, c, max, maxBytes, lease)
		if !errors.Is(err, errConsumerGone) {
			return out, err
		}
		if attempt == 2 {
			return nil, fmt.Errorf("%w: %s/%d kept closing under a consume", partition.ErrLogClosed, key.Topic, key.Partition)
		}
	}
}

// leaseLocked is leaseFrom's work under q's lock (the partition's single
// pump: one lease at a time per partition, so no record goes to two
// callers).
func (n *Node) leaseLocked(q *queue, c *consumer, max, maxBytes int, lease time.Duration) ([]LeasedRecord, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	frontier, live := c.frontierIfLive()
	if q.dropped || !live {
		return nil, errConsumerGone
	}
	l := c.log
	if start := l.StartOffset(); frontier < start {
		// Retention deleted records nobody acked: nothing can deliver them.
		if err := c.skipRange(n.committer, frontier, start); err != nil {
			return nil, err
		}
		frontier = start
	}
	q.trim(frontier)
	now := time.Now()
	if expired := q.reclaim(now); expired > 0 {
		n.consumerMetrics.leaseExpirations.Add(float64(expired))
	}
	if len(q.leased) >= MaxLeasedPerPartition {
		return nil, fmt.Errorf("%w: %s/%d holds %d", ErrTooManyLeased, q.key.Topic, q.key.Partition, len(q.leased))
	}
	deadline := now.Add(lease)
	var out []LeasedRecord
	bytes := 0
	room := func() bool { return len(out) < max && bytes < maxBytes && len(q.leased) < MaxLeasedPerPartition }
	take := func(r partition.ReadRecord) {
		q.leased[r.Offset] = deadline
		out = append(out, LeasedRecord{Partition: q.key.Partition, ReadRecord: r, LeaseDeadline: deadline})
		bytes += len(r.Key) + len(r.Value)
	}
	fail := func(err error) ([]LeasedRecord, error) {
		for _, r := range out {
			q.giveBack(r.Offset)
		}
		return nil, err
	}
	for room() && len(q.redeliver) > 0 {
		o := q.redeliver[0]
		if c.acked(o) {
			q.redeliver = q.redeliver[1:]
			continue
		}
		res, err := l.Read(o, 1, maxBytes-bytes)
		var unreadable *partition.UnreadableError
		switch {
		case errors.As(err, &unreadable):
			if err := n.settleUnreadable(q, c, o, unreadable.Next); err != nil {
				return fail(err)
			}
			continue
		case errors.Is(err, partition.ErrOffsetDeleted):
			q.redeliver = q.redeliver[1:]
			continue
		case err != nil:
			return fail(err)
		}
		q.redeliver = q.redeliver[1:]
		if len(res.Records) > 0 {
			take(res.Records[0])
			n.consumerMetrics.redeliveries.Inc()
		}
	}
	for room() && q.next < l.HighWatermark() {
		res, err := l.Read(q.next, max-len(out), maxBytes-bytes)
		var unreadable *partition.UnreadableError
		switch {
		case errors.As(err, &unreadable):
			if err := n.settleUnreadable(q, c, q.next, unreadable.Next); err != nil {
				return fail(err)
			}
			continue
		case errors.Is(err, partition.ErrOffsetDeleted):
			if start := l.StartOffset(); start > q.next {
				q.next = start
				continue
			}
			return fail(err)
		case err != nil:
			return fail(err)
		}
		if len(res.Records) == 0 {
			break
		}
		for _, r := range res.Records {
			if !room() {
				break
			}
			q.next = r.Offset + 1
			if !c.acked(r.Offset) {
				take(r)
			}
		}
	}
	q.arm(n.queues)
	return out, nil
}

// settleUnreadable settles [from, next), records in a damaged frame, as
// consumed without delivering them (docs/design.md: a queue consume skips
// a permanently unreadable record, counts it and logs a warning). The
// caller holds q.mu.
func (n *Node) settleUnreadable(q *queue, c *consumer, from, next int64) error {
	if next <= from {
		return fmt.Errorf("queue consume of %s/%d: a damaged frame at %d reported no end", q.key.Topic, q.key.Partition, from)
	}
	if err := c.skipRange(n.committer, from, next); err != nil {
		return err
	}
	for o := range q.leased {
		if o >= from && o < next {
			delete(q.leased, o)
		}
	}
	kept := q.redeliver[:0]
	for _, o := range q.redeliver {
		if o < from || o >= next {
			kept = append(kept, o)
		}
	}
	q.redeliver = kept
	q.next = max(q.next, next)
	n.consumerMetrics.corruptSkipped.Add(float64(next - from))
	n.logger.Warn("queue consume skipped permanently unreadable records",
		zap.String("topic", q.key.Topic), zap.Int("partition", q.key.Partition),
		zap.Int64("from_offset", from), zap.Int64("to_offset", next-1))
	return nil
}

// Nack gives leased records back for redelivery before their lease runs
// out, and wakes a consumer parked on the topic. Offsets not leased now
// (acked, expired, never leased) are passed over; it returns how many
// were given back.
func (n *Node) Nack(ctx context.Context, topic string, p int, offsets ...int64) (int, error) {
	key, err := n.key(topic, p)
	if err != nil {
		return 0, err
	}
	q := n.queues.lookup(key)
	if q == nil {
		return 0, nil
	}
	given := 0
	q.mu.Lock()
	for _, o := range offsets {
		if _, ok := q.leased[o]; ok {
			q.giveBack(o)
			given++
		}
	}
	q.mu.Unlock()
	if given > 0 {
		n.queues.parking(topic).wake()
	}
	return given, nil
}
