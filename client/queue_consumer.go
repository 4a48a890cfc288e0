package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/narad-io/storage/api"
)

// QueueConsumerOptions shape a QueueConsumer. The zero value leases up
// to 100 records a consume for 30 s, long-polls 10 s, holds at most 1,000
// records in work and renews a record's lease for at most an hour.
type QueueConsumerOptions struct {
	// MaxRecords and MaxBytes bound each consume (ConsumeOptions), and
	// MaxRecords each Receive.
	MaxRecords, MaxBytes int
	// Lease is each lease's length, the consume's and each renewal's:
	// 1 ms to 12 h, default 30 s. A record in work is renewed when a
	// third of its lease is left.
	Lease time.Duration
	// Wait is each consume's long poll: 1 ms to 60 s, default 10 s. A
	// consume waits a third of Lease at most: a record leased at the end
	// of a long poll is taken to be leased when the consume was sent, and
	// is renewed when a third of its lease is left, so a longer poll would
	// bring it at, or past, the end the client can be sure of.
	Wait time.Duration
	// MaxInWork bounds the records leased and not settled (Ack, Nack)
	// nor lost (LeaseLost): no consume is sent while that many are;
	// default 1,000. Each owner's consume leases its share at most,
	// MaxInWork over the owners (1 at least), so an idle owner's long
	// poll holds no room a busy owner needs; owners waiting for room get
	// it first come, first served. Below the number of owners, the owners
	// take the room in turn, and the turn of an owner whose last consume
	// leased nothing is a 1 ms poll while one that leased records waits:
	// a busy owner's records do not wait for idle long polls, but each
	// of its consumes may cost a short one to every idle owner.
	MaxInWork int
	// MaxHold bounds how long a record's lease is renewed after it was
	// leased; then its lease runs out and the record is delivered again
	// (LeaseLost says so). Default 1 h.
	MaxHold time.Duration
	// UntilEmpty makes Receive return io.EOF once nothing is left to
	// lease: nothing is ready or in work (every record Receive returned
	// is settled or lost), and every node that owns partitions of the
	// topic answered a consume that leased nothing (Drained), confirmed
	// by an owners read begun after those answers that found no
	// partition moved since they were sent (a partition that moved may
	// have been under neither owner's consume). A consume that failed
	// after it was sent (no answer, an answer cut or unreadable) may have
	// leased records the client never got: they are free again when
	// their lease runs out, and only the answers of consumes sent after
	// that count; so with a record this consumer nacked, or whose lease
	// it lost (it is free again on its node), only answers of consumes
	// sent after it was freed count. io.EOF is final: the consumer leases nothing more
	// (what a consume in flight then leased is given back at once), and
	// every later Receive returns io.EOF; Close it still. Records leased
	// to other consumers then, committed later, or given back later are
	// not waited for. A node whose consumes fail is not drained: after
	// MaxConsumeFailures of its consumes failed in a row, Receive
	// returns the last failure, naming the node.
	UntilEmpty bool
	// MaxConsumeFailures bounds, with UntilEmpty, the consumes of one
	// node that may fail in a row before the consumer ends with the last
	// failure (the drain cannot tell whether that node has records):
	// default 10, about 10 s of the retry schedule when each fails at
	// once. Without UntilEmpty a node's failing consumes are retried
	// while the consumer lives.
	MaxConsumeFailures int
	// OnConsumeError, when set, is told each failed consume of a node
	// (its address) that will be sent again after a backoff: the
	// consumer retries quietly otherwise. It is called from the
	// consumer's goroutines, one per node, possibly at once, outside its
	// lock; it must not block long (that node's consumes wait for it).
	OnConsumeError func(node string, err error)
}

// ErrQueueConsumerClosed is a QueueConsumer's error after Close.
var ErrQueueConsumerClosed = errors.New("narad: queue consumer closed")

// Message is a record a QueueConsumer leased: settle it with Ack or
// Nack. Its fields are the record's; its lease is the consumer's to
// renew.
type Message struct {
	Partition   int
	Offset      int64
	Key, Value  []byte
	CommittedAt time.Time
	LeaseID     uint64 // the lease it was given with (LeasedRecord)

	q *QueueConsumer
	// Under q.mu:
	deadline  time.Time // its lease's end as the client can be sure of: sent + lease
	leasedAt  time.Time // when the consume that leased it was sent
	freeBy    time.Time // its lease's end on its node at the latest: answer + lease
	renewAt   time.Time // when the renewer extends it next (zero: not again)
	settled   bool      // acked or nacked (or given back by Close)
	lost      bool      // its lease ran out, or was not extended: it may be another consumer's
	fails     int       // extensions failed in a row
	part      uint64    // an extension naming it with others extended fewer: it is extended with the others of its part (renewKey)
	settling  int       // acks and nacks of it in flight: it is renewed apart meanwhile (renewKey.settling)
	extending bool      // an extension naming it is in flight
}

// Ack settles m (QueueConsumer.Ack).
func (m *Message) Ack(ctx context.Context) error { return m.q.Ack(ctx, m) }

// Nack gives m back for redelivery now (QueueConsumer.Nack).
func (m *Message) Nack(ctx context.Context) error { return m.q.Nack(ctx, m) }

// LeaseLost reports that m's lease ended before it was settled: it ran
// out (MaxHold passed, or renewals failed up to its end), the node no
// longer knew it (the partition moved, the node restarted), or the record
// was leased again, to this consumer or another. Acking m still settles
// the record; its work may be done twice. A message lost holds no room
// of MaxInWork, and Receive does not return it if it had not yet.
func (m *Message) LeaseLost() bool {
	m.q.mu.Lock()
	defer m.q.mu.Unlock()
	return m.lost
}

// QueueConsumer leases the records of every partition of a topic as a
// queue consumer (docs/http-api.md, "Queue consume"): each record is
// leased to one consumer at a time, handed to the caller by Receive, and
// settled by Ack or given back by Nack. What it holds is bounded by
// MaxInWork records. It renews the lease of each record in work, Receive
// buffered or handed out, when a third of it is left (ExtendLease, for
// Lease again, up to MaxHold after the record was leased), without the
// caller doing anything.
//
// It sends topic-wide consumes with a long poll: one goroutine and one
// request in flight per node that owns partitions of the topic (one, on
// a node alone), never one per partition. In a cluster it learns the
// owners from the topic's description, again every ownersEvery and after
// a consume fails, so a partition that moves is leased from its new owner
// (queue_consumer_owners.go). Its renewals, acks and nacks name their
// partition and follow 421 answers to its owner.
//
// Close gives back (nacks) every record not settled, and ends the
// consumes in flight: what one of them had leased and not answered yet
// comes back when its lease runs out.
//
// Invariants, under mu:
//   - every Message leased, not settled and not lost is in work, keyed
//     by its partition and offset, the latest lease of each record;
//     ready holds those Receive has not returned yet, in the order
//     leased;
//   - len(work) + reserved <= MaxInWork; reserved is what the consumes
//     in flight may lease;
//   - waiters holds each loop that wants room and has not reserved it,
//     once, in the order they asked: only the first may reserve, and a
//     loop that ends leaves it;
//   - once err is set, eof, or closed, no consume is sent;
//   - once eof, ready and work are empty and stay so.
type QueueConsumer struct {
	c           *Client
	topic       string
	opts        QueueConsumerOptions
	incarnation string

	ctx    context.Context // the loops'; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	work     map[recordKey]*Message
	ready    []*Message
	loops    map[string]*ownerLoop // by node: "" the client's own, else its address
	reserved int                   // records the consumes in flight may lease
	waiters  []*ownerLoop          // the loops waiting for room, first come first: only the first may reserve
	err      error                 // terminal: Receive's answer once ready is empty
	closed   bool
	changed  chan struct{} // closed and made again when ready grows, work shrinks, err is set or the consumer closes

	refresh   chan struct{}            // a loop asks the owners to be read again (buffered, one)
	renewWake chan struct{}            // a consume brought records to renew, or an extension ended (buffered, one)
	renewing  map[string]chan struct{} // by node, as in loops: a slot of each extension in flight to it (buffered, renewSlots)
	owners    map[int]string           // partition -> its owner, as in loops, as the last description named it
	parts     uint64                   // the last part a short extension's records were split into (renewKey)

	// What UntilEmpty's io.EOF rests on (ownerLoop.emptyAt):
	seq          uint64 // orders empty answers and owners reads
	ownersGen    uint64 // bumped when a read finds a partition's owner changed (or a new partition)
	ownersReadAt uint64 // the q.seq the last successful owners read began at
	eof          bool   // Receive returned io.EOF: nothing is leased any more
}

// recordKey names a record of the topic.
type recordKey struct {
	p int
	o int64
}

// NewQueueConsumer describes the topic (to learn its owners and
// incarnation) and begins leasing from every node that owns some of its
// partitions. ctx bounds the description only: the consumer runs until
// Close, whatever becomes of ctx.
func (c *Client) NewQueueConsumer(ctx context.Context, topic string, opts QueueConsumerOptions) (*QueueConsumer, error) {
	if opts.MaxRecords == 0 {
		opts.MaxRecords = 100
	}
	if opts.Lease == 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Wait == 0 {
		opts.Wait = 10 * time.Second
	}
	if opts.MaxInWork == 0 {
		opts.MaxInWork = 1000
	}
	if opts.MaxHold == 0 {
		opts.MaxHold = time.Hour
	}
	if opts.MaxConsumeFailures == 0 {
		opts.MaxConsumeFailures = 10
	}
	switch {
	case opts.MaxRecords < 0 || opts.MaxRecords > api.MaxConsumeRecords:
		return nil, fmt.Errorf("narad: queue consumer: MaxRecords %d: want 1 to %d", opts.MaxRecords, api.MaxConsumeRecords)
	case opts.MaxBytes < 0 || opts.MaxBytes > api.MaxFetchBytes:
		return nil, fmt.Errorf("narad: queue consumer: MaxBytes %d: want 1 to %d", opts.MaxBytes, api.MaxFetchBytes)
	case opts.Lease < time.Millisecond || opts.Lease > api.MaxLeaseMs*time.Millisecond:
		return nil, fmt.Errorf("narad: queue consumer: Lease %v: want 1 ms to 12 h", opts.Lease)
	case opts.Wait < time.Millisecond || opts.Wait > api.MaxWaitMs*time.Millisecond:
		return nil, fmt.Errorf("narad: queue consumer: Wait %v: want 1 ms to %d s", opts.Wait, api.MaxWaitMs/1000)
	case opts.MaxInWork < 0:
		return nil, fmt.Errorf("narad: queue consumer: MaxInWork %d is negative", opts.MaxInWork)
	case opts.MaxHold < 0:
		return nil, fmt.Errorf("narad: queue consumer: MaxHold %v is negative", opts.MaxHold)
	case opts.MaxConsumeFailures < 0:
		return nil, fmt.Errorf("narad: queue consumer: MaxConsumeFailures %d is negative", opts.MaxConsumeFailures)
	}
	desc, err := c.Topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	q := &QueueConsumer{c: c, topic: topic, opts: opts, incarnation: desc.Incarnation,
		work: map[recordKey]*Message{}, loops: map[string]*ownerLoop{},
		changed: make(chan struct{}), refresh: make(chan struct{}, 1), renewWake: make(chan struct{}, 1),
		renewing: map[string]chan struct{}{}, owners: map[int]string{}}
	q.ctx, q.cancel = context.WithCancel(context.WithoutCancel(ctx))
	q.mu.Lock()
	err = q.startLoops(desc)
	q.mu.Unlock()
	if err != nil {
		q.cancel()
		q.wg.Wait()
		return nil, err
	}
	q.wg.Add(2)
	go q.renewer()
	go q.watchOwners()
	return q, nil
}

// notify wakes whoever waits on changed; q.mu is held.
func (q *QueueConsumer) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// fail ends the consumer with err (the first error wins); q.mu is held.
func (q *QueueConsumer) fail(err error) {
	if q.err == nil {
		q.err = err
		q.notify()
	}
}

// Receive returns the records leased and not returned yet, at most
// MaxRecords, waiting for some as long as ctx allows (with UntilEmpty,
// io.EOF once nothing is left to lease, and after it always). Records of
// different partitions come in no set order, and a record nacked, or
// whose lease ran out, comes again. An error no consume can mend (the
// topic deleted, or deleted and made again) ends the consumer: Receive
// returns it once the records leased before it were returned. Receive
// may be called from several goroutines.
func (q *QueueConsumer) Receive(ctx context.Context) ([]*Message, error) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, ErrQueueConsumerClosed
		}
		if q.eof {
			q.mu.Unlock()
			return nil, io.EOF
		}
		if n := min(len(q.ready), q.opts.MaxRecords); n > 0 {
			out := q.ready[:n:n]
			q.ready = q.ready[n:]
			if len(q.ready) == 0 {
				q.notify() // a loop held back by the floor while records were ready may consume now
			}
			q.mu.Unlock()
			return out, nil
		}
		if q.err != nil {
			err := q.err
			q.mu.Unlock()
			return nil, err
		}
		if q.opts.UntilEmpty && len(q.work) == 0 && q.drained() {
			q.eof = true
			q.notify() // the loops end
			q.mu.Unlock()
			return nil, io.EOF
		}
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Drained reports that every node that owns partitions of the topic (as
// the consumer last read the owners) answered a consume that leased
// nothing, not since contradicted, and no record is ready for Receive: a
// round over every owner found nothing free to lease. Such a round counts
// once an owners read begun after it found no partition moved since its
// consumes were sent (UntilEmpty asks for that read at once; otherwise it
// comes within ownersEvery), and only from consumes sent after a failed
// one's records, if it leased any, and the records nacked or lost since,
// are free again. A node whose last
// consume leased records or failed, or that has answered none yet, is not
// drained.
func (q *QueueConsumer) Drained() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.drained()
}

// drained is Drained; q.mu is held.
func (q *QueueConsumer) drained() bool {
	if len(q.ready) > 0 || len(q.loops) == 0 {
		return false
	}
	for _, l := range q.loops {
		if !l.stop && (!l.emptyRun(q.ownersGen) || q.ownersReadAt < l.emptyAt) {
			return false
		}
	}
	return true
}

// took takes what a consume sent at sent leased into work and ready;
// q.mu is held. A record still in work under an earlier lease was leased
// again: that lease ended (the node leases a record to one lease at a
// time), so the earlier Message is lost, and replaced.
func (q *QueueConsumer) took(recs []LeasedRecord, sent time.Time) {
	for _, r := range recs {
		m := &Message{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, CommittedAt: r.CommittedAt,
			LeaseID: r.LeaseID, q: q, deadline: sent.Add(q.opts.Lease), leasedAt: sent, freeBy: time.Now().Add(q.opts.Lease)}
		m.renewAt = q.renewTime(m)
		k := recordKey{r.Partition, r.Offset}
		if old := q.work[k]; old != nil {
			q.lose(old)
		}
		q.work[k] = m
		q.ready = append(q.ready, m)
	}
	if len(recs) > 0 {
		q.notify()
	}
}

// lose marks m lost, its lease ended, and takes it out of work and
// ready: it holds no room of MaxInWork, and Receive does not hand it out
// if it has not yet; q.mu is held.
func (q *QueueConsumer) lose(m *Message) {
	m.lost, m.renewAt = true, time.Time{}
	if k := (recordKey{m.Partition, m.Offset}); q.work[k] == m {
		delete(q.work, k)
	}
	if i := slices.Index(q.ready, m); i >= 0 {
		q.ready = slices.Delete(q.ready, i, i+1)
	}
	q.notify()
}

// freed says a record of the topic is free to lease again by until at
// the latest (given back, or its lease lost): no empty run of a loop
// counts whose consumes were sent before (ownerLoop.doubtUntil); q.mu is
// held.
func (q *QueueConsumer) freed(until time.Time) {
	for _, l := range q.loops {
		if until.After(l.doubtUntil) {
			l.doubtUntil = until
		}
	}
}

// settle takes m out of work, and says whether it was there (the
// caller then notifies); q.mu is held.
func (q *QueueConsumer) settle(m *Message) bool {
	m.settled, m.renewAt = true, time.Time{}
	if k := (recordKey{m.Partition, m.Offset}); q.work[k] == m {
		delete(q.work, k)
		return true
	}
	return false
}

// Ack settles msgs, one request per partition (Client.Ack). A message
// settled already is passed over. On an error the messages of the
// partitions that failed stay in work, their leases renewed: Ack or Nack
// them again.
func (q *QueueConsumer) Ack(ctx context.Context, msgs ...*Message) error {
	return q.settleAll(ctx, msgs, func(p int, _ uint64, offsets []int64) error {
		_, err := q.c.Ack(ctx, q.topic, p, offsets...)
		return err
	}, func(*Message) uint64 { return 0 }, false)
}

// Nack gives msgs back for redelivery now, one request per partition
// and lease (Client.Nack). A message whose lease ran out meanwhile is not
// given back (it is another consumer's, or will be); a message settled
// already is passed over.
func (q *QueueConsumer) Nack(ctx context.Context, msgs ...*Message) error {
	return q.settleAll(ctx, msgs, func(p int, lease uint64, offsets []int64) error {
		_, err := q.c.Nack(ctx, q.topic, p, lease, offsets...)
		return err
	}, func(m *Message) uint64 { return m.LeaseID }, true)
}

// settleAll sends msgs, grouped by partition and by what lease says
// (nothing for acks, the lease id for nacks), one call a group, and
// settles each group that succeeded. msgs are all checked to be q's
// before any is sent; while its call is in flight a message is renewed
// apart from the others of its lease (settling).
func (q *QueueConsumer) settleAll(ctx context.Context, msgs []*Message, send func(p int, lease uint64, offsets []int64) error, lease func(*Message) uint64, frees bool) error {
	type group struct {
		p     int
		lease uint64
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrQueueConsumerClosed
	}
	for _, m := range msgs {
		if m.q != q {
			q.mu.Unlock()
			return errors.New("narad: queue consumer: a message of another consumer")
		}
	}
	groups := map[group][]*Message{}
	var order []group
	for _, m := range msgs {
		if m.settled {
			continue
		}
		m.settling++
		g := group{m.Partition, lease(m)}
		if groups[g] == nil {
			order = append(order, g)
		}
		groups[g] = append(groups[g], m)
	}
	q.mu.Unlock()
	var errs []error
	for _, g := range order {
		offsets := make([]int64, len(groups[g]))
		for i, m := range groups[g] {
			offsets[i] = m.Offset
		}
		err := send(g.p, g.lease, offsets)
		q.mu.Lock()
		freed := false
		for _, m := range groups[g] {
			m.settling--
			if err == nil {
				freed = q.settle(m) || freed
			}
		}
		if err == nil && frees {
			q.freed(time.Now()) // given back: free before the answer came
		}
		if freed {
			q.notify()
		}
		q.mu.Unlock()
		if err != nil {
			q.wakeRenewer() // its records are renewed again
			errs = append(errs, fmt.Errorf("narad: queue consumer of %s, partition %d: %w", q.topic, g.p, err))
		}
	}
	return errors.Join(errs...)
}

// Close ends the consumes in flight and the renewals, then gives back
// (nacks) every record not settled, those Receive returned too, as far as
// ctx allows: a record a nack did not reach comes back when its lease
// runs out. A record whose Ack or Nack is in flight is left to it. After
// Close, Receive, Ack and Nack return
// ErrQueueConsumerClosed. Close may be called from any goroutine; a
// second call returns nil at once.
func (q *QueueConsumer) Close(ctx context.Context) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.notify()
	q.mu.Unlock()
	q.cancel()
	q.wg.Wait()

	type group struct {
		p     int
		lease uint64
	}
	q.mu.Lock()
	groups := map[group][]int64{}
	for _, m := range q.work {
		if !m.lost && m.settling == 0 { // one being acked or nacked is that call's
			g := group{m.Partition, m.LeaseID}
			groups[g] = append(groups[g], m.Offset)
		}
		m.settled = true
	}
	clear(q.work)
	q.ready = nil
	q.mu.Unlock()
	var errs []error
	for g, offsets := range groups {
		if _, err := q.c.Nack(ctx, q.topic, g.p, g.lease, offsets...); err != nil {
			errs = append(errs, fmt.Errorf("narad: queue consumer of %s, giving back %d records of partition %d: %w", q.topic, len(offsets), g.p, err))
		}
	}
	return errors.Join(errs...)
}
