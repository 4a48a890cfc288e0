package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/api"
)

// ProducerOptions shape a Producer. The zero value batches up to 10,000
// records or 1 MiB a partition, lingers 5 ms, keeps 4 requests in flight
// a partition and holds 32 MiB of records, blocking Produce when full.
type ProducerOptions struct {
	// BatchRecords and BatchBytes bound a batch, one request and one
	// durable commit: it is sent once it holds this many records, or
	// once the next record would take its encoded bytes past BatchBytes
	// (a record larger than BatchBytes goes in a batch of its own).
	// Defaults 10,000 and 1 MiB; at most 100,000 and 64 MiB, the API's
	// bounds of one request.
	BatchRecords int
	BatchBytes   int
	// Linger is how long a batch waits for more records after its first
	// before it is sent anyway; default 5 ms, negative for none. A batch
	// waiting for a free request slot goes on filling past it.
	Linger time.Duration
	// MaxInFlight bounds the requests of one partition sent and not yet
	// answered; default 4. More than one needs the client's own
	// transport: with Options.HTTPClient a partition has one at a time.
	MaxInFlight int
	// BufferBytes bounds the records held (each counted at its encoded
	// size: key, value and their lengths) from Produce until its result;
	// default 32 MiB. FailWhenFull makes Produce fail with ErrBufferFull
	// when a record does not fit, instead of waiting for room.
	BufferBytes  int64
	FailWhenFull bool
	// RetryAmbiguous sends a batch again after a failure that does not
	// say whether it was committed (no answer, 500, 503 fenced), as it
	// does after one that says nothing was done. Such a retry can store
	// the batch twice (docs/durability.md, "The promise"); without it
	// the batch fails with ErrAmbiguous.
	RetryAmbiguous bool
}

// The defaults of ProducerOptions, and the bounds a record is held to.
const (
	defaultBatchRecords = 10_000
	defaultBatchBytes   = 1 << 20
	defaultLinger       = 5 * time.Millisecond
	defaultMaxInFlight  = 4
	defaultBufferBytes  = 32 << 20
	// maxKeyBytes is the API's bound on a key (docs/http-api.md,
	// "Produce"): a record past it would fail its whole batch, so
	// Produce refuses it alone.
	maxKeyBytes = 64 << 10
)

// Result is a record's outcome: its partition and, once committed, its
// offset; or the error that failed it (Offset is then -1).
type Result struct {
	Partition int
	Offset    int64
	Err       error
}

// The Producer's own errors. A failed record's error wraps one of these
// or is an *Error answer (matched with errors.Is against the sentinels).
var (
	// ErrProducerClosed: Produce after Close, or a record Close did not
	// send before its context ended (never sent: not stored).
	ErrProducerClosed = errors.New("narad: the producer is closed")
	// ErrBufferFull: a record that does not fit in BufferBytes, with
	// FailWhenFull.
	ErrBufferFull = errors.New("narad: the producer's buffer is full")
	// ErrRecordTooLarge: a record that can never be sent (a key over
	// 64 KiB, a record over the buffer or a request's 64 MiB).
	ErrRecordTooLarge = errors.New("narad: record too large")
	// ErrAmbiguous: the batch was sent and no answer said whether it
	// was committed: it may have been, and a retry could store it twice.
	// It wraps what happened (the transport's error, 500 internal, 503
	// fenced, a Close whose context ended).
	ErrAmbiguous = errors.New("narad: the batch may or may not have been committed")
	// ErrNotResent: the batch's request was answered with nothing done,
	// but a later batch of its partition was committed first: sending
	// it again would put its records after the later ones, so it is
	// failed instead. It wraps the answer. It happens only with
	// MaxInFlight above 1.
	ErrNotResent = errors.New("narad: not sent again, a later batch of its partition was committed first")
)

// UnsentError is a Flush's or a Close's error when its context ended
// first: how many records were not sent yet and how many were sent and
// not answered. After a Close they were failed: the unsent with
// ErrProducerClosed (not stored), the others with ErrAmbiguous.
type UnsentError struct {
	Unsent, InFlight int64
	Err              error // the context's error
}

func (e *UnsentError) Error() string {
	return fmt.Sprintf("narad: producer: %d records not sent, %d sent and not answered: %v", e.Unsent, e.InFlight, e.Err)
}

func (e *UnsentError) Unwrap() error { return e.Err }

// ProducerStats are a Producer's counts since it was made.
type ProducerStats struct {
	Requests  int64 // produce requests written, retries included
	Committed int64 // requests answered 200
	Retries   int64 // batches sent again (after nothing done, a 421, or an ambiguous failure with RetryAmbiguous)
	Acked     int64 // records committed
	Failed    int64 // records failed
}

// Producer sends records to the partitions of one topic, in batches
// (package doc, "Producer"). It is safe for concurrent use; Close it.
//
// Invariants, under mu:
//   - parts[i].produced - parts[i].settled records of partition i are in
//     its open batch, its ready queue or its sender's hands, each with
//     its bytes in buffered; buffered <= BufferBytes.
//   - Records of one partition go into its batches in the order Produce
//     took them, batches are taken in order, and results are given in
//     that order (producer_send.go keeps the rest).
//   - Once closing, no record is taken and no sender is started.
type Producer struct {
	c         *Client
	topic     string
	opts      ProducerOptions
	pipelined bool // the client's own transport: several requests in flight a partition
	bodies    bodies

	ctx    context.Context // every request's; cancelled when a Close's context ends
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // the senders

	mu       sync.Mutex
	n        int     // the topic's partitions, from its last describe
	parts    []*part // at least n
	sticky   int     // the partition keyless records go to
	stickyID uint64  // the batch they stuck to; another open batch there (or none) moves them on
	// stuckSize and stuckRecords are the last closed batch's of keyless
	// records: the first such batch of a partition starts at them.
	stuckSize, stuckRecords int
	nextID                  uint64 // batch ids
	buffered                int64
	room                    chan struct{} // closed when bytes are given back
	settledCh               chan struct{} // closed when records are settled
	closing                 bool
	closed                  chan struct{} // closed by Close
	finished                chan struct{} // closed once Close is done

	aborted struct{ unsent, inFlight atomic.Int64 } // what an aborted Close failed
	stats   struct{ requests, committed, retries, acked, failed atomic.Int64 }
}

// part is one partition's share of the producer; its fields but id are
// under Producer.mu.
type part struct {
	id       int
	open     *batch   // taking records
	ready    []*batch // full or flushed, to send in order
	running  bool     // a sender runs for it
	wake     chan struct{}
	produced int64 // records taken
	settled  int64 // records whose result was given
	// lastSize and lastRecords are its last batch's, closed: the next
	// one's capacities.
	lastSize, lastRecords int
}

// NewProducer describes topic (its partition count) and returns a
// producer of it.
func (c *Client) NewProducer(ctx context.Context, topic string, opts ProducerOptions) (*Producer, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	t, err := c.Topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if len(t.Partitions) == 0 {
		return nil, fmt.Errorf("narad: topic %s has no partitions", topic)
	}
	p := &Producer{c: c, topic: topic, opts: opts, pipelined: c.ownHTTP,
		room: make(chan struct{}), settledCh: make(chan struct{}), closed: make(chan struct{}), finished: make(chan struct{})}
	p.bodies.initial, p.bodies.keep = min(opts.BatchBytes, 64<<10), 2*opts.BatchBytes
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	p.setPartitions(len(t.Partitions))
	p.sticky = rand.IntN(p.n)
	return p, nil
}

func (o *ProducerOptions) normalize() error {
	if o.BatchRecords == 0 {
		o.BatchRecords = defaultBatchRecords
	}
	if o.BatchBytes == 0 {
		o.BatchBytes = defaultBatchBytes
	}
	if o.Linger == 0 {
		o.Linger = defaultLinger
	}
	o.Linger = max(o.Linger, 0)
	if o.MaxInFlight == 0 {
		o.MaxInFlight = defaultMaxInFlight
	}
	if o.BufferBytes == 0 {
		o.BufferBytes = defaultBufferBytes
	}
	switch {
	case o.BatchRecords < 0 || o.BatchRecords > api.MaxProduceRecords:
		return fmt.Errorf("narad: producer: BatchRecords %d: want 1 to %d", o.BatchRecords, api.MaxProduceRecords)
	case o.BatchBytes < 0 || o.BatchBytes > api.MaxProduceBytes:
		return fmt.Errorf("narad: producer: BatchBytes %d: want 1 to %d", o.BatchBytes, api.MaxProduceBytes)
	case o.MaxInFlight < 0:
		return fmt.Errorf("narad: producer: MaxInFlight %d: want 1 or more", o.MaxInFlight)
	case o.BufferBytes < 0:
		return fmt.Errorf("narad: producer: BufferBytes %d: want 1 or more", o.BufferBytes)
	}
	return nil
}

// setPartitions takes a describe's partition count; called under mu (or
// before the producer is shared).
func (p *Producer) setPartitions(n int) {
	p.n = n
	for len(p.parts) < n {
		p.parts = append(p.parts, &part{id: len(p.parts), wake: make(chan struct{}, 1)})
	}
	if p.sticky >= n {
		p.sticky, p.stickyID = 0, 0
	}
}

// Partitions is the topic's partition count the producer places records
// by: its describe's, refreshed when an answer says the topic changed.
func (p *Producer) Partitions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Produce takes a record for the partition its key hashes to
// (KeyPartition), or, without a key, the partition keyless records
// stick to until its batch is sent. It copies the record: the caller may
// reuse its slices once Produce returns. done, if not nil, is called
// once with the record's result, from the producer's goroutines, for the
// records of one partition in the order Produce took them; it must not
// block long (the partition's later results wait for it) nor call Flush
// or Close.
//
// Produce returns an error, and done is not called, when the record is
// not taken: ErrProducerClosed, ErrRecordTooLarge, ErrBufferFull (with
// FailWhenFull), or ctx's error while it waited for room in the buffer.
func (p *Producer) Produce(ctx context.Context, r Record, done func(Result)) error {
	return p.produce(ctx, -1, r, done)
}

// ProduceTo is Produce to partition partition, whatever the key.
func (p *Producer) ProduceTo(ctx context.Context, partition int, r Record, done func(Result)) error {
	if partition < 0 {
		return fmt.Errorf("narad: partition %d: %w", partition, ErrPartitionNotFound)
	}
	return p.produce(ctx, partition, r, done)
}

func (p *Producer) produce(ctx context.Context, pinned int, r Record, done func(Result)) error {
	size := int64(recordSize(r))
	switch {
	case len(r.Key) > maxKeyBytes:
		return fmt.Errorf("%w: a key of %d bytes; keys are at most %d", ErrRecordTooLarge, len(r.Key), maxKeyBytes)
	case size > api.MaxProduceBytes || size > p.opts.BufferBytes:
		return fmt.Errorf("%w: %d bytes; the buffer holds %d and a request %d", ErrRecordTooLarge, size, p.opts.BufferBytes, api.MaxProduceBytes)
	}
	p.mu.Lock()
	for !p.closing && p.buffered+size > p.opts.BufferBytes {
		if p.opts.FailWhenFull {
			p.mu.Unlock()
			return ErrBufferFull
		}
		p.flushLocked() // what is buffered is all that can make room
		room := p.room
		p.mu.Unlock()
		select {
		case <-room:
		case <-p.closed:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	if p.closing {
		p.mu.Unlock()
		return ErrProducerClosed
	}
	if pinned >= p.n {
		n := p.n
		p.mu.Unlock()
		return fmt.Errorf("narad: partition %d of %s, which has %d: %w", pinned, p.topic, n, ErrPartitionNotFound)
	}
	pt := p.parts[p.place(pinned, r.Key)]
	b := pt.open
	if b != nil && b.records > 0 && b.size+size > int64(p.opts.BatchBytes) {
		p.closeOpen(pt) // the record would take the batch past its bytes
		b = nil
	}
	if b == nil {
		p.nextID++
		size, records := pt.lastSize, pt.lastRecords
		if size == 0 && len(r.Key) == 0 && pinned < 0 {
			// Keyless records fill one partition's batch after another:
			// the first batch of a partition is as large as the last one
			// of another (grown record by record from the producer's
			// first size, 16 partitions' first bodies were a sixth of the
			// produce command's CPU).
			size, records = p.stuckSize, p.stuckRecords
		}
		b = newBatch(p.nextID, pt.id, p.bodies.get(size), records)
		pt.open = b
		p.signal(pt) // its linger starts
	}
	if len(r.Key) == 0 && pinned < 0 {
		p.stickyID = b.id
	}
	b.add(r, done, size)
	pt.produced++
	p.buffered += size
	if b.records >= p.opts.BatchRecords || b.size >= int64(p.opts.BatchBytes) {
		p.closeOpen(pt)
	}
	p.mu.Unlock()
	return nil
}

// place is the partition of a record: pinned, its key's, or the sticky
// one, moved on once the batch it stuck to is no longer open. Under mu.
func (p *Producer) place(pinned int, key []byte) int {
	switch {
	case pinned >= 0:
		return pinned
	case len(key) > 0:
		return KeyPartition(key, p.n)
	}
	if p.stickyID != 0 {
		if open := p.parts[p.sticky].open; open == nil || open.id != p.stickyID {
			p.sticky, p.stickyID = (p.sticky+1)%p.n, 0
		}
	}
	return p.sticky
}

// closeOpen moves pt's open batch to its ready queue and wakes its
// sender. Under mu.
func (p *Producer) closeOpen(pt *part) {
	pt.lastSize, pt.lastRecords = len(pt.open.body), pt.open.records
	if pt.open.id == p.stickyID {
		p.stuckSize, p.stuckRecords = pt.lastSize, pt.lastRecords
	}
	pt.ready = append(pt.ready, pt.open)
	pt.open = nil
	p.signal(pt)
}

// signal wakes pt's sender, starting one if none runs. Under mu.
func (p *Producer) signal(pt *part) {
	if !pt.running {
		pt.running = true
		p.wg.Add(1)
		go newSender(p, pt).run()
		return
	}
	select {
	case pt.wake <- struct{}{}:
	default:
	}
}

// flushLocked closes every open batch: they are sent without lingering.
// Under mu.
func (p *Producer) flushLocked() {
	for _, pt := range p.parts {
		if pt.open != nil {
			p.closeOpen(pt)
		}
	}
}

// Flush sends every record taken so far without waiting for its linger,
// and returns once each has its result (its done returned). If ctx ends
// first it returns an *UnsentError saying how many records are still
// waiting; nothing is dropped.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	targets := make([]int64, len(p.parts))
	for i, pt := range p.parts {
		targets[i] = pt.produced
	}
	p.flushLocked()
	p.mu.Unlock()
	return p.await(ctx, targets)
}

// await waits until each partition's settled count reaches its target,
// or ctx ends (an *UnsentError).
func (p *Producer) await(ctx context.Context, targets []int64) error {
	for {
		p.mu.Lock()
		waiting := false
		for i, t := range targets {
			waiting = waiting || p.parts[i].settled < t
		}
		ch := p.settledCh
		if !waiting {
			p.mu.Unlock()
			return nil
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			defer p.mu.Unlock()
			e := &UnsentError{Err: ctx.Err()}
			for _, pt := range p.parts {
				unsent := int64(0)
				for _, b := range pt.ready {
					unsent += int64(b.records)
				}
				if pt.open != nil {
					unsent += int64(pt.open.records)
				}
				e.Unsent += unsent
				e.InFlight += pt.produced - pt.settled - unsent
			}
			return e
		}
	}
}

// Close sends every record taken, waits for their results and ends the
// producer: Produce then fails with ErrProducerClosed. If ctx ends first,
// the records not sent yet fail with ErrProducerClosed (never stored),
// the requests in flight are abandoned and their records fail with
// ErrAmbiguous (they may have been committed), and Close returns an
// *UnsentError counting both. Every done is called before Close returns.
// A second Close waits for the first and returns nil.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		<-p.finished
		return nil
	}
	p.closing = true
	close(p.closed)
	targets := make([]int64, len(p.parts))
	for i, pt := range p.parts {
		targets[i] = pt.produced
	}
	p.flushLocked()
	p.mu.Unlock()
	err := p.await(ctx, targets)
	if err != nil {
		p.cancel(ctx.Err())
	}
	p.wg.Wait()
	p.cancel(ErrProducerClosed)
	close(p.finished)
	if err != nil {
		return &UnsentError{Unsent: p.aborted.unsent.Load(), InFlight: p.aborted.inFlight.Load(), Err: ctx.Err()}
	}
	return nil
}

// Stats returns the producer's counts.
func (p *Producer) Stats() ProducerStats {
	return ProducerStats{Requests: p.stats.requests.Load(), Committed: p.stats.committed.Load(), Retries: p.stats.retries.Load(),
		Acked: p.stats.acked.Load(), Failed: p.stats.failed.Load()}
}

// refresh describes the topic again after an answer said a partition
// or the topic is not there: later records are placed by the partition
// count it finds (a topic deleted and made again may have another).
func (p *Producer) refresh() {
	t, err := p.c.Topic(p.ctx, p.topic)
	if err != nil || len(t.Partitions) == 0 {
		return
	}
	p.mu.Lock()
	p.setPartitions(len(t.Partitions))
	p.mu.Unlock()
}

// batchError is a record's error that is one of the producer's kinds
// (ErrAmbiguous, ErrNotResent, ErrProducerClosed) and the error behind it.
type batchError struct{ kind, err error }

func (e *batchError) Error() string   { return e.kind.Error() + ": " + e.err.Error() }
func (e *batchError) Unwrap() []error { return []error{e.kind, e.err} }
