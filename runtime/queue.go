package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
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
	// Admit, when set, is asked before each attempt to lease (the first,
	// and each after a wake-up): an error ends the consume with it, and
	// nothing is leased. release is called when the attempt leased
	// nothing (the consume waits on, or answers empty); after an attempt
	// that leased records it is the caller's to call. A daemon bounds the
	// memory of answers with it, without holding any while a consume
	// waits.
	Admit func() (release func(), err error)
}

// LeasedRecord is a record a queue consume leased to its caller.
type LeasedRecord struct {
	Partition int
	partition.ReadRecord
	LeaseDeadline time.Time
	// LeaseID names the lease (one per partition a consume leased from):
	// a Nack gives a record back only under the lease it was given with.
	// An id is never given twice for a partition, across restarts, nodes
	// and moves, and is below 2^53.
	LeaseID uint64
}

// queue is one partition's queue-consume state (docs/design.md, "Queue
// consume"): the leases handed out and the offsets given back for
// redelivery. It is memory only: a crash or a restart redelivers whatever
// was not acked (at-least-once). It outlives the partition's log being
// closed (idle eviction, the open-log budget), so a close never hands a
// leased record out again early, and it is dropped with its topic's
// incarnation, like the rest of the consumer state, and when its
// partition is installed anew.
//
// Its position comes only from the consumer progress it leases against
// (bound), under mu, never from progress looked up before: a queue made
// with progress an install replaced meanwhile takes nothing from it. When
// the progress is recovered afresh (the log reopened after a close), the
// queue checks its offsets against it (bindLocked).
//
// Invariants, under mu, with low = max(the bound consumer's frontier, the
// log's start): every offset in [low, next) is acked, leased, in
// redeliver, or was settled as unreadable (in passed, when the acked-ahead
// set had no room for it); no offset at or past next is leased or in
// redeliver; leased and redeliver are disjoint; redeliver is sorted; given
// holds only offsets of redeliver (given back after a delivery);
// len(leased) <= MaxLeasedPerPartition; every lease's id came from ids.
// Lock order: queues.mu is never held while a queue's mu is taken; a
// queue's mu, then its consumer's mu; never the other way.
type queue struct {
	key         supervisor.Key
	incarnation wire.IncarnationID

	mu        sync.Mutex
	bound     *consumer          // the progress leased against; nil before the first lease
	recheck   atomic.Bool        // a close lost acks since bound was live (bindLocked clears it)
	next      int64              // the lowest offset never handed out
	leased    map[int64]lease    // offset -> its lease
	redeliver []int64            // given back (nack, expiry, a failed read), sorted
	given     map[int64]struct{} // of redeliver: delivered before (a nack, an expiry)
	passed    []span             // settled as unreadable in memory only, sorted, disjoint
	ids       leaseIDs           // this partition's lease ids (queue_leaseid.go)
	timer     *time.Timer        // fires at the earliest lease deadline
	armedFor  time.Time          // the deadline timer is set for
	dropped   bool
}

// span is the offsets [from, to).
type span struct{ from, to int64 }

// lease is one record's lease: until deadline, to the lease of one
// partition by one consume, named id.
type lease struct {
	deadline time.Time
	id       uint64
}

// queues holds the node's queue state, by partition, and the queue
// consumers parked on each topic.
type queues struct {
	n *Node

	mu     sync.Mutex // guards by and parked; a leaf
	by     map[supervisor.Key]*queue
	parked map[string]*parking
}

func newQueues(n *Node) *queues {
	return &queues{n: n, by: map[supervisor.Key]*queue{}, parked: map[string]*parking{}}
}

// of returns key's queue for the incarnation of the consumer c, creating
// it (unbound: its first lease takes its position). A queue of another
// incarnation is replaced (and dropped), unless a lease bound it and c is
// no longer live: the deleted incarnation's queues were dropped with its
// progress, so that queue is the live incarnation's, with live leases,
// and c a deleted incarnation's, taken by a consume just before the
// delete; of returns nil then, and the consume starts over. Any other
// queue of another incarnation is such a consume's leftover.
func (qs *queues) of(key supervisor.Key, c *consumer) *queue {
	for {
		qs.mu.Lock()
		q := qs.by[key]
		if q == nil {
			q = &queue{key: key, incarnation: c.incarnation, leased: map[int64]lease{}, given: map[int64]struct{}{}}
			qs.by[key] = q
		}
		qs.mu.Unlock()
		if q.incarnation == c.incarnation {
			return q
		}
		q.mu.Lock()
		if q.bound != nil && !q.dropped {
			if _, live := c.frontierIfLive(); !live {
				q.mu.Unlock()
				return nil
			}
		}
		qs.mu.Lock()
		replaced := qs.by[key] == q
		if replaced {
			delete(qs.by, key) // made afresh by the next turn
		}
		qs.mu.Unlock()
		if replaced {
			q.drop()
		}
		q.mu.Unlock()
	}
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

// wakeNotifier is what a partition's log calls at every announcement.
func (qs *queues) wakeNotifier(key supervisor.Key) func() {
	p := qs.parking(key.Topic)
	return func() { p.wake(key.Partition) }
}

// forget drops the queues of the partitions match selects.
func (qs *queues) forget(match func(supervisor.Key) bool) {
	qs.mu.Lock()
	var gone []*queue
	for k, q := range qs.by {
		if match(k) {
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

// drop forgets a deleted incarnation's leases, with its other consumer
// state (docs/design.md, "The incarnation marker"), and wakes the
// consumers parked on the topic, which find it gone.
func (qs *queues) drop(topic string) {
	qs.forget(func(k supervisor.Key) bool { return k.Topic == topic })
	qs.mu.Lock()
	p := qs.parked[topic]
	delete(qs.parked, topic)
	qs.mu.Unlock()
	if p != nil {
		p.wakeAll()
	}
}

// close stops every lease timer and wakes every parked consumer, which
// then finds the node closed.
func (qs *queues) close() {
	qs.forget(func(supervisor.Key) bool { return true })
	qs.mu.Lock()
	parked := qs.parked
	qs.parked = map[string]*parking{}
	qs.mu.Unlock()
	for _, p := range parked {
		p.wakeAll()
	}
}

// settled takes acked offsets out of key's leases; one that frees a slot
// of a partition at its lease bound wakes a consumer parked on it.
func (qs *queues) settled(key supervisor.Key, offsets []int64) {
	q := qs.lookup(key)
	if q == nil {
		return
	}
	q.mu.Lock()
	full := len(q.leased) >= MaxLeasedPerPartition
	for _, o := range offsets {
		delete(q.leased, o)
	}
	freed := full && len(q.leased) < MaxLeasedPerPartition
	q.mu.Unlock()
	if freed {
		qs.parking(key.Topic).wake(key.Partition)
	}
}

// drop stops the timer and marks q gone; the caller holds q.mu.
func (q *queue) drop() {
	q.dropped = true
	if q.timer != nil {
		q.timer.Stop()
	}
}

// giveBack puts o up for redelivery, marked as delivered before when it
// was; the caller holds q.mu.
func (q *queue) giveBack(o int64, delivered bool) {
	delete(q.leased, o)
	if delivered {
		q.given[o] = struct{}{}
	}
	i := sort.Search(len(q.redeliver), func(i int) bool { return q.redeliver[i] >= o })
	if i < len(q.redeliver) && q.redeliver[i] == o {
		return
	}
	q.redeliver = append(q.redeliver, 0)
	copy(q.redeliver[i+1:], q.redeliver[i:])
	q.redeliver[i] = o
}

// popRedeliver takes the lowest offset given back, and whether it was
// delivered before; the caller holds q.mu.
func (q *queue) popRedeliver() (o int64, delivered bool) {
	o = q.redeliver[0]
	q.redeliver = q.redeliver[1:]
	_, delivered = q.given[o]
	delete(q.given, o)
	return o, delivered
}

// reclaim gives back every lease past its deadline and returns how many;
// the caller holds q.mu.
func (q *queue) reclaim(now time.Time) int {
	n := 0
	for o, l := range q.leased {
		if !now.Before(l.deadline) {
			q.giveBack(o, true)
			n++
		}
	}
	return n
}

// bindLocked makes c the progress q leases against. A queue's first
// binding takes its position from c (trim, next, does it). A later one
// (the log reopened after a close: idle eviction, the open-log budget, a
// retention change) gives back for redelivery every offset of [low,
// next) that c does not hold acked and q neither leased, gave back nor
// passed over as unreadable: acks a close failed to write out are
// delivered again, never passed over; the walk steps over each passed
// range at once, so its cost is in what q handed out, not in the damage.
// The caller holds q.mu.
func (q *queue) bindLocked(c *consumer, low int64) {
	var lost []int64
	c.mu.Lock()
	if q.bound != nil {
		r, p := q.redeliver, q.passed // sorted: walked beside o
		for o := max(low, c.frontier); o < q.next; o++ {
			for len(p) > 0 && p[0].to <= o {
				p = p[1:]
			}
			if len(p) > 0 && p[0].from <= o {
				o = p[0].to - 1 // never delivered: nothing of it was acked
				continue
			}
			for len(r) > 0 && r[0] < o {
				r = r[1:]
			}
			_, acked := c.ahead[o]
			_, leased := q.leased[o]
			if !acked && !leased && (len(r) == 0 || r[0] != o) {
				lost = append(lost, o)
			}
		}
	}
	if !c.dropped {
		// Checked against progress recovered after every close that
		// lost acks; a close of c sets it again (under c.mu).
		q.recheck.Store(false)
	}
	c.mu.Unlock()
	for _, o := range lost {
		q.given[o] = struct{}{}
	}
	q.redeliver = mergeSorted(q.redeliver, lost)
	q.bound = c
}

// mergeSorted merges two sorted lists of distinct offsets.
func mergeSorted(a, b []int64) []int64 {
	if len(b) == 0 {
		return a
	}
	out := make([]int64, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0] < b[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// passOver records [from, to) as settled as unreadable in memory only;
// the caller holds q.mu.
func (q *queue) passOver(from, to int64) {
	i := sort.Search(len(q.passed), func(i int) bool { return q.passed[i].to >= from })
	j := i
	for j < len(q.passed) && q.passed[j].from <= to {
		from, to = min(from, q.passed[j].from), max(to, q.passed[j].to)
		j++
	}
	q.passed = slices.Replace(q.passed, i, j, span{from, to})
}

// trim drops what lies below low (acked past, or deleted by retention);
// the caller holds q.mu.
func (q *queue) trim(low int64) {
	q.next = max(q.next, low)
	for len(q.passed) > 0 && q.passed[0].to <= low {
		q.passed = q.passed[1:]
	}
	for o := range q.leased {
		if o < low {
			delete(q.leased, o)
		}
	}
	for len(q.redeliver) > 0 && q.redeliver[0] < low {
		q.popRedeliver()
	}
}

// idle reports that q has nothing to hand out below hwm now; the caller
// holds q.mu.
func (q *queue) idle(hwm int64, now time.Time) bool {
	if q.next < hwm || len(q.redeliver) > 0 {
		return false
	}
	for _, l := range q.leased {
		if !now.Before(l.deadline) {
			return false
		}
	}
	return true
}

// arm sets the timer for the earliest lease deadline, which gives the
// expired leases back and wakes a parked consumer; the caller holds q.mu.
func (q *queue) arm(qs *queues) {
	var earliest time.Time
	for _, l := range q.leased {
		if earliest.IsZero() || l.deadline.Before(earliest) {
			earliest = l.deadline
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
// partition (docs/design.md, "Wake-ups for waiting readers": a lease
// expiry).
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
		qs.parking(q.key.Topic).wake(q.key.Partition)
	}
}

// Consume leases records of topic to the caller (docs/design.md, "Queue
// consume"): each record below the high watermark that is neither acked
// nor leased goes to exactly one caller, with a lease deadline and the
// lease's id. An Ack settles it; a Nack with the lease's id, or the lease
// running out, gives it back for redelivery. A record in a damaged frame
// (a recorded gap, a frame that fails its check) is settled without being
// delivered, counted in narad_consumer_corrupt_skipped_total and logged
// as a warning. An I/O error gives back what the call had leased of that
// partition and is returned, unless other partitions gave records, which
// are returned then. With Wait, a consume that finds nothing free (or
// every partition at its lease bound) parks on the topic and is woken by
// a commit, a nack, a lease expiry or a freed slot of a partition it
// takes, or answers empty at the deadline.
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
		if partitions, err = n.rotation(ctx, rec); err != nil {
			return nil, err
		}
	} else if opts.Partition < 0 || opts.Partition >= rec.Partitions {
		return nil, fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, topic, opts.Partition)
	}
	if opts.Wait <= 0 {
		return n.leaseAdmitted(ctx, topic, partitions, opts)
	}
	t := time.NewTimer(opts.Wait)
	defer t.Stop()
	requeue := false
	var owed []int // partitions of wake-ups taken and not yet served
	for {
		// The topic's parking list, again each time: a drop of the topic's
		// consumer state (a delete, a quarantine) replaces it.
		pk := n.queues.parking(topic)
		w := pk.park(opts.Partition, requeue) // before the check, so no wake-up is missed
		out, err := n.leaseAdmitted(ctx, topic, partitions, opts)
		if errors.Is(err, ErrTooManyLeased) {
			err = nil // wait for a slot, as for a record
		}
		done, taken := err != nil || len(out) > 0, false
		if !done {
			select {
			case p := <-w.ch:
				owed, taken = append(owed, p), true
				requeue = true
				if n.closed.Load() {
					err, done = ErrNodeClosed, true
				} else if _, ok, terr := n.ms.Topic(ctx, topic); terr != nil || !ok {
					err, done = terr, true
					if terr == nil {
						err = fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
					}
				} else {
					continue
				}
			case <-t.C:
				done = true
			case <-ctx.Done():
				err, done = ctx.Err(), true
			}
		}
		// Returning: pass on every wake-up taken for a partition this
		// consume did not lease from (another consume may take it), and
		// one for each partition it leased from (more may be free there).
		if !taken {
			if woken, p := pk.unpark(w); woken {
				owed = append(owed, p)
			}
		}
		leased := leasedPartitions(out)
		for _, p := range owed {
			if !slices.Contains(leased, p) {
				pk.wake(p)
			}
		}
		for _, p := range leased {
			pk.wake(p)
		}
		return out, err
	}
}

// leasedPartitions lists the partitions records came from, once each.
func leasedPartitions(recs []LeasedRecord) []int {
	var out []int
	for i, r := range recs {
		if i == 0 || r.Partition != recs[i-1].Partition {
			out = append(out, r.Partition)
		}
	}
	return out
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

// rotation lists the partitions of a topic this node owns (every one,
// alone), starting one further along at each call, so consumes of any
// partition spread over all of them.
func (n *Node) rotation(ctx context.Context, rec TopicRecord) ([]int, error) {
	owned, err := n.owned(ctx, rec)
	if err != nil || len(owned) == 0 {
		return owned, err
	}
	pk := n.queues.parking(rec.Name)
	first := int(pk.rr.Add(1) % uint64(len(owned)))
	rotated := make([]int, 0, len(owned))
	return append(append(rotated, owned[first:]...), owned[:first]...), nil
}

// leaseAdmitted is leaseAny after opts.Admit, whose release is called
// when nothing was leased.
func (n *Node) leaseAdmitted(ctx context.Context, topic string, partitions []int, opts ConsumeOptions) ([]LeasedRecord, error) {
	if opts.Admit == nil {
		return n.leaseAny(ctx, topic, partitions, opts)
	}
	release, err := opts.Admit()
	if err != nil {
		return nil, err
	}
	out, err := n.leaseAny(ctx, topic, partitions, opts)
	if len(out) == 0 {
		release()
	}
	return out, err
}

// leaseAny leases from the partitions in order until opts is met. A
// partition whose queue shows nothing free below its high watermark is
// passed over without opening its log. A partition's error fails the
// consume only when nothing was leased before it: records in hand are
// returned, and the next consume (starting elsewhere in the rotation)
// meets the error again.
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
			if len(out) > 0 {
				break
			}
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
// record to hand out: it has a queue, it last leased against the
// progress recovered for the open log and no close lost acks since (its
// next lease checks progress recovered since, which may hold fewer acks:
// a close that failed, a file damaged meanwhile), and its next offset has
// reached the high watermark with nothing to redeliver; or the partition
// holds no record at all.
func (n *Node) nothingFree(key supervisor.Key) bool {
	var hwm int64
	if l, ok := n.reg.Lookup(key); ok && !l.Closed() {
		hwm = l.HighWatermark()
	} else {
		peeked, known, err := n.PeekHighWatermark(key.Topic, key.Partition)
		if err != nil || !known {
			return false
		}
		hwm = peeked
	}
	q := n.queues.lookup(key)
	if q == nil {
		return hwm == 0
	}
	n.consumers.mu.Lock()
	live := n.consumers.by[key] // the progress recovered for the open log, if any
	n.consumers.mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.recheck.Load() || (live != nil && live != q.bound) {
		return false // its next lease checks the progress recovered since
	}
	return !q.dropped && q.idle(hwm, time.Now())
}
