package runtime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
)

// MaxLeasedPerPartition bounds the records of one partition leased and
// not yet settled: a consume that finds every partition it may lease from
// at the bound fails with ErrTooManyLeased.
const MaxLeasedPerPartition = 10000

// ErrTooManyLeased: the partitions a consume may lease from each hold
// MaxLeasedPerPartition leased records; ack or nack some first.
var ErrTooManyLeased = errors.New("runtime: too many records leased and not settled")

// AnyPartition asks a queue consume to lease from any of the topic's
// partitions.
const AnyPartition = -1

// ConsumeOptions shape one queue consume (Node.Consume).
type ConsumeOptions struct {
	// Partition is the partition to lease from, or AnyPartition.
	Partition int
	// MaxRecords bounds the records leased; default 100.
	MaxRecords int
	// MaxBytes bounds their keys and values; default 1 MiB. At least one
	// record comes when one is free.
	MaxBytes int
	// Lease is how long a record stays leased before it is given back for
	// redelivery unless acked; default 30 s.
	Lease time.Duration
	// Wait is how long a consume that finds no free record waits for one
	// (a long poll); 0 answers at once.
	Wait time.Duration
}

// LeasedRecord is a record a queue consume leased to its caller.
type LeasedRecord struct {
	Partition int
	partition.ReadRecord
	LeaseDeadline time.Time
}

// queue is one partition's queue-consume state (docs/design.md, "Queue
// consume"): the leases handed out and the offsets given back for
// redelivery. It is memory only: a crash or a restart redelivers whatever
// was not acked (at-least-once). It outlives the partition's log being
// closed (idle eviction, the open-log budget), so a close never hands a
// leased record out again early, and it is dropped with its topic's
// incarnation, like the rest of the consumer state.
//
// Invariants, under mu, with low = max(the consumer's frontier, the log's
// start): every offset in [low, next) is acked, leased, in redeliver, or
// was settled as unreadable; no offset at or past next is leased or in
// redeliver; leased and redeliver are disjoint; redeliver is sorted;
// len(leased) <= MaxLeasedPerPartition. Lock order: a queue's mu, then
// its consumer's mu; never the other way.
type queue struct {
	key         supervisor.Key
	incarnation wire.IncarnationID

	mu        sync.Mutex
	next      int64               // the lowest offset never handed out
	leased    map[int64]time.Time // offset -> lease deadline
	redeliver []int64             // given back (nack, expiry, a failed read), sorted
	timer     *time.Timer         // fires at the earliest lease deadline
	armedFor  time.Time           // the deadline timer is set for
	dropped   bool
}

// queues holds the node's queue state, by partition, and the queue
// consumers parked on each topic.
type queues struct {
	n      *Node
	mu     sync.Mutex // guards by and parked; a leaf
	by     map[supervisor.Key]*queue
	parked map[string]*parking
}

func newQueues(n *Node) *queues {
	return &queues{n: n, by: map[supervisor.Key]*queue{}, parked: map[string]*parking{}}
}

// of returns key's queue for the consumer c belongs to, creating it at
// c's frontier; a queue of another incarnation is replaced.
func (qs *queues) of(key supervisor.Key, c *consumer) *queue {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.by[key]
	if q == nil || q.incarnation != c.incarnation {
		if q != nil {
			q.drop()
		}
		q = &queue{key: key, incarnation: c.incarnation, leased: map[int64]time.Time{}}
		q.next = c.frontierNow()
		qs.by[key] = q
	}
	return q
}

// lookup returns key's queue, if it has one.
func (qs *queues) lookup(key supervisor.Key) *queue {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.by[key]
}

// parking returns topic's parked consumers, creating the list on first use.
func (qs *queues) parking(topic string) *parking {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	p := qs.parked[topic]
	if p == nil {
		p = &parking{}
		qs.parked[topic] = p
	}
	return p
}

// drop forgets a deleted incarnation's leases, with its other consumer
// state (docs/design.md, "The incarnation marker").
func (qs *queues) drop(topic string) {
	qs.mu.Lock()
	var gone []*queue
	for k, q := range qs.by {
		if k.Topic == topic {
			gone = append(gone, q)
			delete(qs.by, k)
		}
	}
	qs.mu.Unlock()
	for _, q := range gone {
		q.mu.Lock()
		q.drop()
		q.mu.Unlock()
	}
}

// close stops every lease timer and wakes every parked consumer, which
// then finds the node closed.
func (qs *queues) close() {
	qs.mu.Lock()
	all, parked := qs.by, qs.parked
	qs.by = map[supervisor.Key]*queue{}
	qs.mu.Unlock()
	for _, q := range all {
		q.mu.Lock()
		q.drop()
		q.mu.Unlock()
	}
	for _, p := range parked {
		for p.count.Load() > 0 {
			p.wake()
		}
	}
}

// settled takes acked offsets out of key's leases.
func (qs *queues) settled(key supervisor.Key, offsets []int64) {
	q := qs.lookup(key)
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, o := range offsets {
		delete(q.leased, o)
	}
}

// drop stops the timer and marks q gone; the caller holds q.mu.
func (q *queue) drop() {
	q.dropped = true
	if q.timer != nil {
		q.timer.Stop()
	}
}

// giveBack puts o up for redelivery; the caller holds q.mu.
func (q *queue) giveBack(o int64) {
	delete(q.leased, o)
	i := sort.Search(len(q.redeliver), func(i int) bool { return q.redeliver[i] >= o })
	if i < len(q.redeliver) && q.redeliver[i] == o {
		return
	}
	q.redeliver = append(q.redeliver, 0)
	copy(q.redeliver[i+1:], q.redeliver[i:])
	q.redeliver[i] = o
}

// reclaim gives back every lease past its deadline and returns how many;
// the caller holds q.mu.
func (q *queue) reclaim(now time.Time) int {
	n := 0
	for o, deadline := range q.leased {
		if !now.Before(deadline) {
			q.giveBack(o)
			n++
		}
	}
	return n
}

// trim drops what lies below low (acked past, or deleted by retention);
// the caller holds q.mu.
func (q *queue) trim(low int64) {
	q.next = max(q.next, low)
	for o := range q.leased {
		if o < low {
			delete(q.leased, o)
		}
	}
	i := sort.Search(len(q.redeliver), func(i int) bool { return q.redeliver[i] >= low })
	q.redeliver = q.redeliver[i:]
}

// idle reports, without opening anything, that q has nothing to hand out
// below hwm now; the caller holds q.mu.
func (q *queue) idle(hwm int64, now time.Time) bool {
	if q.next < hwm || len(q.redeliver) > 0 {
		return false
	}
	for _, deadline := range q.leased {
		if !now.Before(deadline) {
			return false
		}
	}
	return true
}

// arm sets the timer for the earliest lease deadline, which gives the
// expired leases back and wakes a parked consumer; the caller holds q.mu.
func (q *queue) arm(qs *queues) {
	var earliest time.Time
	for _, deadline := range q.leased {
		if earliest.IsZero() || deadline.Before(earliest) {
			earliest = deadline
		}
	}
	if earliest.IsZero() || q.dropped || (q.timer != nil && q.armedFor.Equal(earliest)) {
		return
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	q.armedFor = earliest
	q.timer = time.AfterFunc(time.Until(earliest), func() { qs.expire(q) })
}

// expire runs at a lease deadline: it gives the expired leases back, sets
// the timer for the next deadline, and wakes a consumer parked on the
// topic (docs/design.md, "Wake-ups for waiting readers": a lease expiry).
func (qs *queues) expire(q *queue) {
	q.mu.Lock()
	if q.dropped {
		q.mu.Unlock()
		return
	}
	q.armedFor = time.Time{}
	expired := q.reclaim(time.Now())
	q.arm(qs)
	q.mu.Unlock()
	if expired > 0 {
		qs.n.consumerMetrics.leaseExpirations.Add(float64(expired))
		qs.parking(q.key.Topic).wake()
	}
}

// Consume leases records of topic to the caller (docs/design.md, "Queue
// consume"): each record below the high watermark that is neither acked
// nor leased goes to exactly one caller, with a lease deadline. An Ack
// settles it; a Nack, or the lease running out, gives it back for
// redelivery. A record in a damaged frame (a recorded gap, a frame that
// fails its check) is settled without being delivered, counted in
// narad_consumer_corrupt_skipped_total and logged as a warning. An I/O
// error gives back what the call had leased and is returned. With Wait, a
// consume that finds nothing free parks on the topic and is woken by a
// commit, a nack or a lease expiry (the logs' wake notifier), or answers
// empty at the deadline.
func (n *Node) Consume(ctx context.Context, topic string, opts ConsumeOptions) ([]LeasedRecord, error) {
	if err := wire.ValidateTopicName(topic); err != nil {
		return nil, err
	}
	if n.closed.Load() {
		return nil, ErrNodeClosed
	}
	opts = opts.withDefaults()
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	partitions := []int{opts.Partition}
	if opts.Partition == AnyPartition {
		partitions = n.rotation(topic, rec.Partitions)
	} else if opts.Partition < 0 || opts.Partition >= rec.Partitions {
		return nil, fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, topic, opts.Partition)
	}
	pk := n.queues.parking(topic)
	var deadline <-chan time.Time
	if opts.Wait > 0 {
		t := time.NewTimer(opts.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		ch := pk.park() // before the check, so no wake-up is missed
		out, err := n.leaseAny(ctx, topic, partitions, opts)
		if err != nil || len(out) > 0 || opts.Wait <= 0 {
			pk.unpark(ch)
			if len(out) > 0 {
				pk.wake() // more may be free: pass it on
			}
			return out, err
		}
		select {
		case <-ch:
		case <-deadline:
			pk.unpark(ch)
			return nil, nil
		case <-ctx.Done():
			pk.unpark(ch)
			return nil, ctx.Err()
		}
		if n.closed.Load() {
			return nil, ErrNodeClosed
		}
	}
}

func (o ConsumeOptions) withDefaults() ConsumeOptions {
	if o.MaxRecords <= 0 {
		o.MaxRecords = 100
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 20
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	return o
}

// rotation lists a topic's partitions starting one further along at each
// call, so consumes of any partition spread over all of them.
func (n *Node) rotation(topic string, count int) []int {
	pk := n.queues.parking(topic)
	first := int(pk.rr.Add(1) % uint64(count))
	out := make([]int, count)
	for i := range out {
		out[i] = (first + i) % count
	}
	return out
}

// leaseAny leases from the partitions in order until opts is met. A
// partition whose queue shows nothing free below its high watermark is
// passed over without opening its log.
func (n *Node) leaseAny(ctx context.Context, topic string, partitions []int, opts ConsumeOptions) ([]LeasedRecord, error) {
	var out []LeasedRecord
	bytes, capped := 0, false
	for _, p := range partitions {
		if len(out) >= opts.MaxRecords || bytes >= opts.MaxBytes {
			break
		}
		key := supervisor.Key{Topic: topic, Partition: p}
		if len(partitions) > 1 && n.nothingFree(key) {
			continue
		}
		got, err := n.leaseFrom(ctx, key, opts.MaxRecords-len(out), opts.MaxBytes-bytes, opts.Lease)
		if errors.Is(err, ErrTooManyLeased) {
			capped = true
			continue
		}
		if err != nil {
			n.giveBackAll(topic, out)
			return nil, err
		}
		for _, r := range got {
			bytes += len(r.Key) + len(r.Value)
		}
		out = append(out, got...)
	}
	if len(out) == 0 && capped {
		return nil, ErrTooManyLeased
	}
	return out, nil
}

// nothingFree reports, without opening the log, that key's queue has no
// record to hand out: it has a queue, and its next offset has reached the
// high watermark with nothing to redeliver.
func (n *Node) nothingFree(key supervisor.Key) bool {
	q := n.queues.lookup(key)
	if q == nil {
		hwm, known, err := n.PeekHighWatermark(key.Topic, key.Partition)
		return err == nil && known && hwm == 0
	}
	hwm, known, err := n.PeekHighWatermark(key.Topic, key.Partition)
	if err != nil || !known {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.dropped && q.idle(hwm, time.Now())
}

// giveBackAll returns records of topic a consume leased and cannot hand
// over.
func (n *Node) giveBackAll(topic string, recs []LeasedRecord) {
	for _, r := range recs {
		if q := n.queues.lookup(supervisor.Key{Topic: topic, Partition: r.Partition}); q != nil {
			q.mu.Lock()
			if _, ok := q.leased[r.Offset]; ok {
				q.giveBack(r.Offset)
			}
			q.mu.Unlock()
		}
	}
}
