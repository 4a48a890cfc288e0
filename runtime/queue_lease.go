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

// errConsumerGone: the consumer state or the log a lease began with was
// settled or closed under it (idle eviction, the open-log budget); the
// lease starts over with the partition's current ones.
var errConsumerGone = errors.New("consumer state settled under a lease")

// leaseFrom leases up to max records, and about maxBytes, of one
// partition under one new lease id: first the ones given back, lowest
// first, then the ones never handed out.
func (n *Node) leaseFrom(ctx context.Context, key supervisor.Key, max, maxBytes int, leaseFor time.Duration) ([]LeasedRecord, error) {
	for attempt := 0; ; attempt++ {
		c, _, err := n.consumerOf(ctx, key.Topic, key.Partition)
		if err != nil {
			return nil, err
		}
		out, err := []LeasedRecord(nil), errConsumerGone
		if q := n.queues.of(key, c); q != nil { // nil: c's incarnation was deleted
			out, err = n.leaseLocked(q, c, max, maxBytes, leaseFor)
		}
		if !errors.Is(err, errConsumerGone) {
			return out, busyError(err) // the lease ids' file or a segment met the open-file limit
		}
		if attempt == 2 {
			return nil, fmt.Errorf("%w: %s/%d kept closing under a consume", partition.ErrLogClosed, key.Topic, key.Partition)
		}
	}
}

// leaseLocked is leaseFrom's work under q's lock (the partition's single
// pump: one lease at a time per partition, so no record goes to two
// callers). The lease's id is drawn (and its floor made durable) before
// any record is read: a read that finds the log closed (a move's freeze)
// gives nothing under it.
func (n *Node) leaseLocked(q *queue, c *consumer, max, maxBytes int, leaseFor time.Duration) (out []LeasedRecord, err error) {
	gaveBack := false
	defer func() {
		if gaveBack {
			n.queues.parking(q.key.Topic).wake(q.key.Partition)
		}
	}()
	q.mu.Lock()
	defer q.mu.Unlock()
	frontier, live := c.frontierIfLive()
	if q.dropped || !live {
		return nil, errConsumerGone
	}
	l := c.log
	if start := l.StartOffset(); frontier < start {
		// Retention deleted records nobody acked: nothing can deliver them.
		if _, err := c.skipRange(n.committer, frontier, start); err != nil {
			return nil, err
		}
		frontier = start
	}
	if q.bound != c {
		q.bindLocked(c, frontier)
	}
	q.trim(frontier)
	now := time.Now()
	if expired := q.reclaim(now); expired > 0 {
		n.consumerMetrics.leaseExpirations.Add(float64(expired))
	}
	if len(q.leased) >= MaxLeasedPerPartition {
		return nil, fmt.Errorf("%w: %s/%d holds %d", ErrTooManyLeased, q.key.Topic, q.key.Partition, len(q.leased))
	}
	id, err := q.ids.next(n, c.dir)
	if err != nil {
		return nil, err
	}
	deadline := now.Add(leaseFor)
	bytes, redelivered := 0, 0
	room := func() bool { return len(out) < max && bytes < maxBytes && len(q.leased) < MaxLeasedPerPartition }
	take := func(r partition.ReadRecord) {
		q.leased[r.Offset] = lease{deadline: deadline, id: id}
		out = append(out, LeasedRecord{Partition: q.key.Partition, ReadRecord: r, LeaseDeadline: deadline, LeaseID: id})
		bytes += len(r.Key) + len(r.Value)
	}
	var wasGiven map[int64]bool // of out: taken from redeliver, delivered before
	fail := func(err error) ([]LeasedRecord, error) {
		for _, r := range out {
			q.giveBack(r.Offset, wasGiven[r.Offset])
		}
		gaveBack = len(out) > 0
		if errors.Is(err, partition.ErrLogClosed) {
			err = errConsumerGone
		}
		return nil, err
	}
	for room() && len(q.redeliver) > 0 {
		o := q.redeliver[0]
		if c.acked(o) {
			q.popRedeliver()
			continue
		}
		res, err := l.Read(o, 1, maxBytes-bytes)
		var unreadable *partition.UnreadableError
		switch {
		case errors.As(err, &unreadable):
			n.settleUnreadable(q, c, o, unreadable.Next)
			continue
		case errors.Is(err, partition.ErrOffsetDeleted):
			q.popRedeliver()
			continue
		case err != nil:
			return fail(err)
		}
		_, delivered := q.popRedeliver()
		if len(res.Records) > 0 {
			take(res.Records[0])
			if delivered {
				redelivered++
				if wasGiven == nil {
					wasGiven = map[int64]bool{}
				}
				wasGiven[o] = true
			}
		}
	}
	for room() && q.next < l.HighWatermark() {
		res, err := l.Read(q.next, max-len(out), maxBytes-bytes)
		var unreadable *partition.UnreadableError
		switch {
		case errors.As(err, &unreadable):
			n.settleUnreadable(q, c, q.next, unreadable.Next)
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
	n.consumerMetrics.redeliveries.Add(float64(redelivered))
	q.arm(n.queues)
	return out, nil
}

// settleUnreadable settles [from, next), records in a damaged frame, as
// consumed without delivering them (docs/design.md: a queue consume skips
// a permanently unreadable record, counts it and logs a warning). When
// the acked-ahead set has no room for them, the queue still passes them
// over in memory (a restart meets them again). The caller holds q.mu.
func (n *Node) settleUnreadable(q *queue, c *consumer, from, next int64) {
	next = max(next, from+1) // a report without an end still moves on
	settled, err := c.skipRange(n.committer, from, next)
	for o := range q.leased {
		if o >= from && o < next {
			delete(q.leased, o)
		}
	}
	kept := q.redeliver[:0]
	for _, o := range q.redeliver {
		if o < from || o >= next {
			kept = append(kept, o)
		} else {
			delete(q.given, o)
		}
	}
	q.redeliver = kept
	q.next = max(q.next, next)
	fields := []zap.Field{zap.String("topic", q.key.Topic), zap.Int("partition", q.key.Partition),
		zap.Int64("from_offset", from), zap.Int64("to_offset", next-1)}
	if err != nil {
		q.passOver(from, next) // a reopen's check does not give them back (bindLocked)
		n.logger.Warn("queue consume passed over permanently unreadable records it could not settle", append(fields, zap.Error(err))...)
		return
	}
	n.consumerMetrics.corruptSkipped.Add(float64(settled))
	n.logger.Warn("queue consume skipped permanently unreadable records", fields...)
}

// Nack gives records back for redelivery before their lease runs out,
// and wakes a consumer parked on the partition. Only records leased now
// under leaseID are given back: one acked, expired or leased again since
// (to another consume) is passed over. It returns how many were given
// back.
func (n *Node) Nack(ctx context.Context, topic string, p int, leaseID uint64, offsets ...int64) (int, error) {
	q, err := n.leasesOf(ctx, topic, p)
	if q == nil || err != nil {
		return 0, err
	}
	given := 0
	q.mu.Lock()
	for _, o := range offsets {
		if l, ok := q.leased[o]; ok && l.id == leaseID {
			q.giveBack(o, true)
			given++
		}
	}
	q.mu.Unlock()
	if given > 0 {
		n.queues.parking(topic).wake(p)
	}
	return given, nil
}

// leasesOf is the queue of the leases of an existing partition, or nil
// when none is in memory (nothing was leased from it since it was
// loaded): what a nack or a lease extension acts on.
func (n *Node) leasesOf(ctx context.Context, topic string, p int) (*queue, error) {
	key, err := n.key(topic, p)
	if err != nil {
		return nil, err
	}
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	if p >= rec.Partitions {
		return nil, fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, topic, p)
	}
	return n.queues.lookup(key), nil
}
