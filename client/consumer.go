package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/narad-io/storage/api"
)

// ConsumerOptions shape a Consumer. The zero value reads every partition
// from its first record up to the high watermark, 16 fetches at a time.
type ConsumerOptions struct {
	// Partitions are the partitions to read; nil is every partition.
	Partitions []int
	// Start is where each partition begins (without a Cursor); with a
	// Cursor it is where the cursor starts on a partition it is not on
	// yet, StartEarliest or StartLatest.
	Start Start
	// Cursor, if set, names a fan-out cursor: each partition begins at
	// the cursor's position (the cursor is made at Start where the topic
	// has none), and Commit moves the cursor past what Poll returned.
	Cursor string
	// Follow keeps reading as records commit: a partition at its high
	// watermark is long-polled, or with more partitions than MaxInFlight
	// waited on by a topic-wide wait with the other idle ones. Without
	// it, Poll returns io.EOF once each partition has been read up to the
	// high watermark it found.
	Follow bool
	// Wait is a long poll's wait, and a topic-wide wait's; default 30 s,
	// at most 60 s.
	Wait time.Duration
	// MaxInFlight bounds the requests in flight at once, fetches, long
	// polls and topic-wide waits, each one goroutine and one connection;
	// default 16.
	MaxInFlight int
	// MaxRecords and MaxBytes bound each fetch (FetchOptions).
	MaxRecords, MaxBytes int
	// SkipDamaged steps over the records of a damaged frame (a Gap);
	// without it Poll returns ErrRecordUnreadable for them. Reads through
	// a Cursor always step over them, as the cursor's own reads do.
	SkipDamaged bool
}

// rotatingWait is a turn: an idle partition's long poll when the consumer
// reads more partitions than it has requests in flight and their node
// has no topic-wide wait (the partitions take turns, each waiting this
// long), and a topic-wide wait's when more nodes own idle partitions
// than the consumer may have waits in flight (the nodes take turns).
const rotatingWait = 250 * time.Millisecond

// Batch is what one Poll returns: records of one partition, in offset
// order, or a gap the consumer stepped over.
type Batch struct {
	Partition     int
	Records       []FetchedRecord
	Gap           *Gap
	HighWatermark int64 // the partition's, when it was read; 0 in a Gap's batch and with an error
}

// Gap is a range of offsets, From to To-1, that the consumer stepped
// over: records retention deleted (Deleted) or records in a damaged
// frame, which are never served.
type Gap struct {
	From, To int64
	Deleted  bool
}

// ErrConsumerClosed is Poll's and Commit's error after Close.
var ErrConsumerClosed = errors.New("narad: consumer closed")

// Consumer reads every partition of a topic (or those its options name),
// each in offset order, from where its Start or its Cursor says; records
// of different partitions come in no set order. It fetches several
// partitions at once, at most MaxInFlight requests in flight, each
// partition one fetch at a time, and keeps at most one answer a
// partition ahead of Poll: what it holds is bounded by MaxInFlight
// answers of MaxBytes. Calls for a partition go to its owner in a
// cluster (the client follows 421 answers), retried as any call is. With
// Follow and more partitions than MaxInFlight, the partitions at their
// high watermark are parked and waited on by one topic-wide wait per
// owner (consumer_wait.go).
//
// Poll and Commit are called from one goroutine at a time. Close may be
// called from any goroutine at any time: a Poll waiting then returns
// ErrConsumerClosed. Cancel a Poll's context to end that Poll alone.
//
// Invariants:
//   - each partition is in flight (one fetch), queued, parked (waits),
//     or finished (read to its high watermark without Follow, or failed
//     terminally), exactly one of them;
//   - once NewConsumer returns, every partition's next is known: past
//     what Poll returned of it, or where its Start or Cursor placed it;
//     a fetch of it starts from next;
//   - inFlight requests (fetches and waits) at most limit, each with a
//     slot in results;
//   - a queued partition with notBefore ahead is not fetched before it;
//   - once err is set nothing more is launched.
type Consumer struct {
	c           *Client
	topic       string
	opts        ConsumerOptions
	incarnation string
	limit       int
	idleWait    time.Duration // a caught-up partition's long poll

	parts    []*partitionRead // in the order of opts.Partitions
	queue    []*partitionRead // to fetch, first in first out
	inFlight int
	fetching int         // of inFlight, the fetches
	waits    *topicWaits // nil: no partition is parked (few partitions, or no Follow)
	results  chan fetched
	err      error // a terminal *PartitionError or *WaitError: every Poll's answer from then on

	ctx       context.Context // the fetches'; Close cancels it
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the fetches' goroutines
	closeOnce sync.Once      // cancel and wait, once

	mu     sync.Mutex // guards closed, and each launch's wg.Add against Close's wg.Wait
	closed bool       // nothing is launched once it is set
}

// partitionRead is the consumer's place in one partition.
type partitionRead struct {
	p         int
	known     bool      // next is set: the start resolved, or the cursor read
	quiet     bool      // retention deleted below next is no Gap (the earliest start, not read yet)
	next      int64     // the next offset to read
	committed int64     // with a cursor: the position it holds
	caughtUp  bool      // its last read ended at the high watermark
	failures  int       // fetches failed in a row
	notBefore time.Time // after a failure: when it may be fetched again

	key       string    // "topic/p" as the client keys owners
	parked    bool      // waited on, not fetched (topicWaits)
	waitedBy  *waitCall // the wait in flight naming it, if parked
	settling  bool      // woken by a wait (or not read yet): its fetch holds the waits back
	notHere   int       // waits that answered it not_here, in a row
	woken     bool      // its fetch in flight (or due) follows a wait's ready
	idleWakes int       // readies in a row whose fetch found nothing new
}

// fetched is a fetch's outcome, or a topic-wide wait's (wait set), for
// Poll.
type fetched struct {
	part   *partitionRead
	from   int64 // the offset read from
	res    Fetched
	wait   *waitCall
	waited TopicWait
	err    error
}

// NewConsumer describes the topic and, with a Cursor, makes it where the
// topic has none and reads its positions; without one it takes where each
// partition begins (a latest start is each partition's high watermark
// now, asked of at most MaxInFlight partitions at once, so a record
// committed after NewConsumer returns is read). Then it begins reading.
// Close ends what it began.
func (c *Client) NewConsumer(ctx context.Context, topic string, opts ConsumerOptions) (*Consumer, error) {
	if opts.Wait == 0 {
		opts.Wait = 30 * time.Second
	}
	if opts.Wait < time.Millisecond || opts.Wait > api.MaxWaitMs*time.Millisecond {
		return nil, fmt.Errorf("narad: consumer: Wait %v: want 1 ms to %d s", opts.Wait, api.MaxWaitMs/1000)
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = 16
	}
	if opts.MaxInFlight < 0 {
		return nil, fmt.Errorf("narad: consumer: MaxInFlight %d is negative", opts.MaxInFlight)
	}
	if opts.Cursor != "" && opts.Start.kind != startEarliest && opts.Start.kind != startLatest {
		return nil, fmt.Errorf("narad: consumer: a cursor starts at earliest or latest, not at %v", opts.Start)
	}
	desc, err := c.Topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	partitions := opts.Partitions
	if partitions == nil {
		for _, p := range desc.Partitions {
			partitions = append(partitions, p.Partition)
		}
	}
	seen := map[int]bool{}
	for _, p := range partitions {
		if p < 0 || p >= len(desc.Partitions) || seen[p] {
			return nil, fmt.Errorf("narad: consumer: partition %d: topic %s has partitions 0 to %d, each read once", p, topic, len(desc.Partitions)-1)
		}
		seen[p] = true
	}
	if len(partitions) == 0 {
		return nil, fmt.Errorf("narad: consumer: no partition to read")
	}
	if err := opts.Start.check(partitions); err != nil {
		return nil, err
	}
	k := &Consumer{c: c, topic: topic, opts: opts, incarnation: desc.Incarnation, limit: min(opts.MaxInFlight, len(partitions)), idleWait: opts.Wait}
	if len(partitions) > opts.MaxInFlight {
		k.idleWait = min(opts.Wait, rotatingWait)
		if opts.Follow {
			k.waits = newTopicWaits(k.limit, len(partitions))
		}
	}
	for _, p := range partitions {
		k.parts = append(k.parts, &partitionRead{p: p, key: partitionKey(topic, p), settling: k.waits != nil})
	}
	if opts.Cursor != "" {
		if err := k.cursorPositions(ctx, desc); err != nil {
			return nil, err
		}
	}
	if err := k.resolveStarts(ctx); err != nil {
		return nil, err
	}
	k.queue = slices.Clone(k.parts)
	k.results = make(chan fetched, k.limit)
	k.ctx, k.cancel = context.WithCancel(context.WithoutCancel(ctx))
	k.launch()
	return k, nil
}

// Poll returns the next batch of records of one partition, or a gap it
// stepped over, waiting for one as long as ctx allows. Without Follow it
// returns io.EOF once every partition was read up to its high
// watermark. An error reading a partition is a *PartitionError. One no
// later read can mend ends the consumer, and every later Poll returns
// it: the topic or the partition is gone (ErrTopicNotFound, also when the
// topic was deleted and made again; ErrPartitionNotFound) or the node
// refused the request as invalid (an invalid_* code). After any other
// the partition is read again from the same offset once a backoff has
// passed (the client's retry schedule: the node's Retry-After, else
// 50 ms doubling to 2 s, per partition, over the failures in a row), the
// other partitions read meanwhile. An error in a topic-wide wait on idle
// partitions is a *WaitError, terminal or backed off the same way (per
// node); a node without the wait is no error: its idle partitions take
// turns.
func (k *Consumer) Poll(ctx context.Context) (Batch, error) {
	for {
		if k.isClosed() {
			return Batch{}, ErrConsumerClosed
		}
		if k.err != nil {
			return Batch{}, k.err
		}
		wake := k.launch()
		if k.inFlight == 0 && len(k.queue) == 0 && (k.waits == nil || k.waits.parked == 0) {
			return Batch{}, io.EOF
		}
		b, err, done := k.await(ctx, wake)
		if done {
			return b, err
		}
	}
}

// await waits for a fetch's or a wait's outcome, for ctx's end, or until
// wake (if not zero), when a backoff has passed; done is true when Poll
// returns b and err.
func (k *Consumer) await(ctx context.Context, wake time.Time) (b Batch, err error, done bool) {
	var retry <-chan time.Time
	if !wake.IsZero() {
		t := time.NewTimer(time.Until(wake))
		defer t.Stop()
		retry = t.C
	}
	select {
	case f := <-k.results:
		k.inFlight--
		if k.ctx.Err() != nil {
			return Batch{}, ErrConsumerClosed, true // f may be the request Close ended
		}
		if f.wait != nil {
			err, deliver := k.waitDone(f)
			return Batch{}, err, deliver
		}
		k.fetching--
		b, err, deliver := k.settle(f)
		if deliver && k.err == nil {
			k.launch() // the partition's next read runs while the caller works
		}
		return b, err, deliver
	case <-retry:
		return Batch{}, nil, false
	case <-k.ctx.Done():
		return Batch{}, ErrConsumerClosed, true
	case <-ctx.Done():
		return Batch{}, ctx.Err(), true
	}
}

// launch starts fetches of the queued partitions, first in first out,
// up to the limit in flight, passing over those whose backoff after a
// failure has not passed; then topic-wide waits on the parked partitions
// in the slots left. wake is when the first backoff still ahead passes,
// zero when none is.
func (k *Consumer) launch() (wake time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return time.Time{}
	}
	now := time.Now()
	wake = k.launchFetches(now)
	if k.waits != nil {
		w, queued := k.launchWaits(now)
		if queued { // partitions of a node without the wait: fetched in turns
			w = earliest(w, k.launchFetches(now))
		}
		wake = earliest(wake, w)
	}
	return wake
}

// launchFetches is launch's fetches. A partition due while every slot
// is a wait's ends a wait (preempt) so it is fetched once that one is
// back.
func (k *Consumer) launchFetches(now time.Time) (wake time.Time) {
	waiting := k.queue[:0]
	blocked := false
	for i, st := range k.queue {
		if now.Before(st.notBefore) {
			waiting = append(waiting, st)
			wake = earliest(wake, st.notBefore)
			continue
		}
		if k.inFlight == k.limit {
			if blocked { // a result comes before any other could start
				waiting = append(waiting, k.queue[i:]...)
				break
			}
			blocked = true
			waiting = append(waiting, st)
			continue
		}
		wait := time.Duration(0)
		if k.opts.Follow && st.caughtUp {
			wait = k.idleWait
		}
		k.inFlight++
		k.fetching++
		k.wg.Add(1)
		go k.fetch(st, st.next, wait)
	}
	clear(k.queue[len(waiting):])
	k.queue = waiting
	if blocked && k.fetching == 0 && k.waits != nil {
		k.waits.preempt()
	}
	return wake
}

// earliest is the earlier of two times, zero being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// fetch reads partition st from next and hands the outcome to Poll;
// results has a slot for it.
func (k *Consumer) fetch(st *partitionRead, next int64, wait time.Duration) {
	defer k.wg.Done()
	f := fetched{part: st, from: next}
	f.res, f.err = k.c.Fetch(k.ctx, k.topic, st.p, next, FetchOptions{MaxRecords: k.opts.MaxRecords, MaxBytes: k.opts.MaxBytes,
		Wait: wait, Incarnation: k.incarnation})
	k.results <- f
}

// settle takes a fetch's outcome into the partition's place and queues
// the partition again (unless it is finished, or the error is terminal);
// deliver is true when Poll has something for its caller.
func (k *Consumer) settle(f fetched) (b Batch, err error, deliver bool) {
	st := f.part
	b.Partition = st.p
	failures, woken := st.failures, st.woken
	st.failures, st.notBefore, st.woken = 0, time.Time{}, false
	if st.settling {
		st.settling = false
		k.waits.settling--
	}
	var e *Error
	switch {
	case f.err == nil:
		st.next, st.caughtUp, st.quiet = f.res.NextOffset, f.res.NextOffset >= f.res.HighWatermark, false
		switch {
		case st.next != f.from:
			st.idleWakes = 0
		case woken && st.caughtUp:
			st.idleWakes++
		}
		switch {
		case !st.caughtUp:
			k.queue = append(k.queue, st)
		case !k.opts.Follow:
		case k.waits != nil && !k.waits.owner(k.ownerOf(st)).noWait:
			k.waits.park(st)
		default:
			k.queue = append(k.queue, st)
		}
		b.Records, b.HighWatermark = f.res.Records, f.res.HighWatermark
		return b, nil, len(b.Records) > 0
	case errors.As(f.err, &e) && e.Code == api.CodeOffsetDeleted && e.StartOffset != nil && *e.StartOffset > f.from:
		st.next = *e.StartOffset
		k.queue = append(k.queue, st)
		if st.quiet {
			return b, nil, false // the earliest start is where the records begin
		}
		b.Gap = &Gap{From: f.from, To: *e.StartOffset, Deleted: true}
		return b, nil, true
	case errors.As(f.err, &e) && e.Code == api.CodeRecordUnreadable && e.NextOffset != nil && *e.NextOffset > f.from &&
		(k.opts.SkipDamaged || k.opts.Cursor != ""):
		st.next, st.quiet = *e.NextOffset, false
		k.queue = append(k.queue, st)
		b.Gap = &Gap{From: f.from, To: *e.NextOffset}
		return b, nil, true
	}
	pe := &PartitionError{Topic: k.topic, Partition: st.p, Offset: f.from, Err: f.err}
	if terminal(f.err) {
		k.err = pe
		return b, pe, true
	}
	st.failures = failures + 1
	st.notBefore = time.Now().Add(retryWait(failures, f.err))
	k.queue = append([]*partitionRead{st}, k.queue...) // read again first, once its backoff passed
	return b, pe, true
}

// terminal is true of an error no later fetch can mend: the topic or the
// partition is gone (a topic deleted, or deleted and made again, is
// topic_not_found to a fetch naming its incarnation), or the node refused
// the request as invalid (each of the API's invalid_* codes).
func terminal(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == api.CodeTopicNotFound || e.Code == api.CodePartitionNotFound || strings.HasPrefix(e.Code, "invalid_"))
}

// PartitionError is a Consumer's error in one partition: Poll reads the
// partition again from Offset once a backoff has passed, unless the error
// is terminal (Poll says which), when every later Poll returns it.
type PartitionError struct {
	Topic     string
	Partition int
	Offset    int64
	Err       error
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("narad: consumer of %s, partition %d at offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }

// Close ends the fetches and waits in flight and waits for them, from
// any goroutine, as often as called. The cursor keeps what Commit last
// stored.
func (k *Consumer) Close() error {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.closeOnce.Do(func() {
		k.cancel()
		k.wg.Wait()
	})
	return nil
}

func (k *Consumer) isClosed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.closed
}
