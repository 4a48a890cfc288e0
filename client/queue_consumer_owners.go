package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/narad-io/storage/api"
)

// A QueueConsumer covers a topic in a cluster itself: a node's
// topic-wide consume leases from the partitions that node owns, so the
// consumer sends one to each owner the topic's description names (the
// node the client was made with for the partitions it serves, or that
// have no owner yet). It reads the description again every ownersEvery,
// and at once after a consume failed (a partition that moved away
// during the consume's wait answers 404 partition_not_found; an owner
// gone does not answer): a node that owns partitions now gets a loop, a
// loop whose node owns none ends before its next consume. A partition
// that moved is leased from its new owner from that owner's next consume
// on: within ownersEvery and a Wait. The leases a moved partition's old
// owner gave do not move (docs/scaling.md): the new owner leases those
// records again, and the renewals of the old leases, followed to the new
// owner, find them gone (LeaseLost).
//
// A description of another incarnation than the consumer's, or none (the
// topic deleted), ends the consumer with ErrTopicNotFound: its acks,
// which name offsets, would settle another topic's records.

// ownersEvery is how often a QueueConsumer reads the topic's owners
// again.
const ownersEvery = 5 * time.Second

// ownerLoop is the consume loop of one node.
type ownerLoop struct {
	node string   // "" for the client's own node, else its address
	url  *url.URL // nil for the client's own node
	stop bool     // under q.mu: the node owns none of the topic's partitions now
	sent bool     // under q.mu: a consume of it was answered
	busy bool     // under q.mu: the last consume of it answered leased records
	// Under q.mu, what UntilEmpty's io.EOF rests on (drained): the
	// node's answers have leased nothing since the consume answered at
	// emptyAt (a q.seq; 0: its last consume leased records or failed, or
	// none was answered), sent at emptySent under owners generation
	// emptyGen. Such a run counts only under the current generation (no
	// partition moved since it began) and when it began after doubtUntil:
	// a failed consume may have leased records the client never got,
	// which are free again when their lease runs out, and a record
	// nacked or lost is free again (QueueConsumer.freed).
	emptyAt, emptyGen uint64
	emptySent         time.Time
	doubtUntil        time.Time
}

// emptyRun reports that l's answers have leased nothing since a consume
// that counts for UntilEmpty under owners generation gen; q.mu is held.
func (l *ownerLoop) emptyRun(gen uint64) bool {
	return l.emptyAt != 0 && l.emptyGen == gen && !l.emptySent.Before(l.doubtUntil)
}

// name is the node's address, for errors.
func (q *QueueConsumer) name(l *ownerLoop) string {
	if l.url == nil {
		return q.c.base.Host
	}
	return l.url.Host
}

// ownersOf lists the nodes a description names as owners.
func ownersOf(desc Topic) map[string]bool {
	nodes := map[string]bool{}
	for _, d := range desc.Partitions {
		nodes[ownerOf(d)] = true
	}
	return nodes
}

// ownerOf is the node a partition's description names as its owner:
// "" for the client's own (or none yet), else its address.
func ownerOf(d api.PartitionDescription) string {
	if d.Remote && d.Owner != nil {
		return d.Owner.Addr
	}
	return ""
}

// startLoops starts a consume loop for each owner desc names that has
// none, and marks the loops of nodes that own none to stop; q.mu is held.
func (q *QueueConsumer) startLoops(desc Topic) error {
	if desc.Incarnation != q.incarnation {
		return fmt.Errorf("narad: queue consumer of %s (incarnation %s): the topic was deleted and made again (now %s): %w",
			q.topic, q.incarnation, desc.Incarnation, ErrTopicNotFound)
	}
	nodes := ownersOf(desc)
	for _, d := range desc.Partitions {
		if o, ok := q.owners[d.Partition]; !ok || o != ownerOf(d) {
			q.ownersGen++ // a partition moved (or is new): an empty round before counts no more
		}
		q.owners[d.Partition] = ownerOf(d)
	}
	for node := range nodes {
		if l := q.loops[node]; l != nil {
			l.stop = false
			continue
		}
		u, err := q.c.nodeAt(node)
		if err != nil {
			return err
		}
		l := &ownerLoop{node: node, url: u}
		q.loops[node] = l
		q.waiters = append(q.waiters, l) // in turn with the loops waiting already
		q.wg.Add(1)
		go q.consumeFrom(l)
	}
	for node, l := range q.loops {
		if !nodes[node] {
			l.stop = true
		}
	}
	for node, slots := range q.renewing {
		if !nodes[node] && len(slots) == 0 {
			delete(q.renewing, node) // an extension in flight holds its own copy
		}
	}
	q.notify() // a loop added shrinks the shares, a loop stopped must see it
	return nil
}

// watchOwners reads the topic's description every ownersEvery, or when
// a loop asks, and starts and stops loops to match; a topic gone, or made
// again, ends the consumer.
func (q *QueueConsumer) watchOwners() {
	defer q.wg.Done()
	t := time.NewTimer(ownersEvery)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-q.ctx.Done():
			return
		case <-t.C:
		case <-q.refresh:
		}
		q.mu.Lock()
		q.seq++
		readAt := q.seq
		q.mu.Unlock()
		desc, err := q.c.Topic(q.ctx, q.topic)
		next := ownersEvery
		q.mu.Lock()
		switch {
		case q.ctx.Err() != nil:
		case errors.Is(err, ErrTopicNotFound):
			q.fail(fmt.Errorf("narad: queue consumer of %s: %w", q.topic, err))
		case err != nil:
			next = retryWait(failures, err)
			failures++
		default:
			failures = 0
			q.ownersReadAt = readAt
			if err := q.startLoops(desc); err != nil {
				q.fail(err)
			}
		}
		done := q.err != nil || q.eof || q.ctx.Err() != nil
		q.mu.Unlock()
		if done {
			return
		}
		t.Reset(next)
	}
}

// askOwners has the owners read again soon.
func (q *QueueConsumer) askOwners() {
	select {
	case q.refresh <- struct{}{}:
	default:
	}
}

// consumeFrom leases from one node while it owns partitions of the
// topic, as many records as there is room for in work, each consume a
// long poll of pollWait (1 ms for an idle loop's turn while a busy one
// waits: room). A failed consume has the owners read again and is
// sent again after a backoff (the client's retry schedule), and is told
// to OnConsumeError; an answer that says the options are invalid ends
// the consumer, as do MaxConsumeFailures in a row with UntilEmpty. What
// a consume leased after io.EOF is given back at once.
func (q *QueueConsumer) consumeFrom(l *ownerLoop) {
	defer q.wg.Done()
	defer func() { // a loop that ends waits for no room: the next may have it
		q.mu.Lock()
		q.unwait(l)
		q.mu.Unlock()
	}()
	failures := 0
	for {
		room, wait, ok := q.room(l)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(q.ctx, wait+consumeMargin)
		sent := time.Now()
		q.mu.Lock()
		gen := q.ownersGen
		q.mu.Unlock()
		recs, err := q.c.consume(ctx, l.url, q.topic, ConsumeOptions{MaxRecords: room,
			MaxBytes: q.opts.MaxBytes, Lease: q.opts.Lease, Wait: wait})
		cancel()
		q.mu.Lock()
		q.reserved -= room
		eof := q.eof
		switch {
		case err == nil && eof: // given back below: Receive hands out nothing more
		case err == nil:
			q.took(recs, sent) // even when closing: Close gives them back
			l.sent, l.busy = true, len(recs) > 0
			if l.busy {
				l.emptyAt = 0
			} else if !l.emptyRun(q.ownersGen) {
				// A run that counts begins, or may: it counts once an owners
				// read that began after this answer finds no partition moved.
				q.seq++
				l.emptyAt, l.emptyGen, l.emptySent = q.seq, gen, sent
				if q.opts.UntilEmpty && l.emptyRun(q.ownersGen) {
					q.askOwners()
				}
			}
		default:
			l.emptyAt = 0
			if mayHaveLeased(err) {
				// What it leased is free again a Lease after the node leased
				// it: before the failure came back.
				l.doubtUntil = time.Now().Add(q.opts.Lease)
			}
			if !slices.Contains(q.waiters, l) {
				q.waiters = append(q.waiters, l) // it asks for room next: its turn is from now
			}
		}
		q.notify() // the room not taken is free again
		q.mu.Unlock()
		if err == nil && eof {
			q.giveBack(recs)
			continue // room says it ends
		}
		if err == nil {
			failures = 0
			q.wakeRenewer()
			continue
		}
		if q.ctx.Err() != nil {
			return
		}
		failures++
		var e *Error
		switch {
		case errors.As(err, &e) && strings.HasPrefix(e.Code, "invalid_"):
			err = fmt.Errorf("narad: queue consumer of %s: %w", q.topic, err)
		case q.opts.UntilEmpty && failures >= q.opts.MaxConsumeFailures:
			err = fmt.Errorf("narad: queue consumer of %s: node %s: %d consumes failed in a row, the last: %w", q.topic, q.name(l), failures, err)
		default:
			if q.opts.OnConsumeError != nil {
				q.opts.OnConsumeError(q.name(l), err)
			}
			q.askOwners()
			if backoff(q.ctx, failures-1, err) != nil {
				return
			}
			continue
		}
		q.mu.Lock()
		q.fail(err)
		q.mu.Unlock()
		return
	}
}

// giveBack nacks what a consume leased after io.EOF, bounded by
// consumeMargin (Close waits for it): what it does not reach comes back
// when its lease runs out.
func (q *QueueConsumer) giveBack(recs []LeasedRecord) {
	type group struct {
		p     int
		lease uint64
	}
	groups := map[group][]int64{}
	for _, r := range recs {
		g := group{r.Partition, r.LeaseID}
		groups[g] = append(groups[g], r.Offset)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(q.ctx), consumeMargin)
	defer cancel()
	for g, offsets := range groups {
		q.c.Nack(ctx, q.topic, g.p, g.lease, offsets...)
	}
}

// consumeMargin is how long after its Wait a consume is given up, as
// a failed one: a node that does not answer holds no loop for ever.
const consumeMargin = 10 * time.Second

// pollWait is each consume's long poll: Wait, but a third of Lease at
// most (1 ms at least). A record leased at the end of a poll is taken
// to be leased when the consume was sent (its deadline as the client can
// be sure of), and is renewed when a third of its lease is left: a
// longer poll would bring records due, or past, their renewal.
func (q *QueueConsumer) pollWait() time.Duration {
	return max(time.Millisecond, min(q.opts.Wait, q.opts.Lease/3))
}

// room waits until l may send a consume, room for half of MaxRecords
// or of l's share of MaxInWork (MaxInWork over the loops) at least, or
// any when no record is ready for Receive: it returns how many records
// it may lease, reserved (the caller gives back what the consume did not
// take), and the consume's long poll, or false when l is to end (its
// node owns nothing of the topic now, the consumer is closed or failed,
// or Receive returned io.EOF).
//
// Loops that wait for room are granted it first come, first served
// (q.waiters): a loop back from an empty poll does not take the room
// freed before a loop that waited for it. A loop whose last consume
// leased nothing (or that has sent none), granted room while one waits
// behind it that is busy (its last consume leased records) or has sent
// none, polls 1 ms only: its turn holds no room for a long poll while
// another owner's records may wait (MaxInWork below the number of
// owners). It cannot spin: it waits behind that loop for its next turn,
// and a loop is busy only while its consumes lease records.
func (q *QueueConsumer) room(l *ownerLoop) (int, time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		switch {
		case q.closed || q.err != nil || q.eof || q.ctx.Err() != nil:
			q.unwait(l)
			return 0, 0, false
		case l.stop:
			q.unwait(l)
			if q.loops[l.node] == l {
				delete(q.loops, l.node)
			}
			return 0, 0, false
		}
		// A loop reserves its share of MaxInWork at most: an idle owner's
		// long poll holds no more, and the busy ones lease the rest. Room
		// for half a consume at least, unless nothing is ready: a consume
		// a settled record at a time would be the consumer's pace.
		share := max(1, q.opts.MaxInWork/max(1, len(q.loops)))
		floor := max(1, min(q.opts.MaxRecords, share)/2)
		n := min(q.opts.MaxInWork-len(q.work)-q.reserved, q.opts.MaxRecords, share)
		if first := len(q.waiters) == 0 || q.waiters[0] == l; first && (n >= floor || (n > 0 && len(q.ready) == 0)) {
			q.reserved += n
			q.unwait(l)
			wait := q.pollWait()
			if !l.busy && slices.ContainsFunc(q.waiters, func(w *ownerLoop) bool { return w.busy || !w.sent }) {
				wait = time.Millisecond
			}
			return n, wait, true
		}
		if !slices.Contains(q.waiters, l) {
			q.waiters = append(q.waiters, l)
		}
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-changed:
		case <-q.ctx.Done():
		}
		q.mu.Lock()
	}
}

// unwait takes l out of the loops waiting for room, and wakes the next
// if l was first (room left may be its); q.mu is held.
func (q *QueueConsumer) unwait(l *ownerLoop) {
	i := slices.Index(q.waiters, l)
	if i < 0 {
		return
	}
	q.waiters = slices.Delete(q.waiters, i, i+1)
	if i == 0 && len(q.waiters) > 0 {
		q.notify()
	}
}

// mayHaveLeased reports that a failed consume may have leased records on
// its node: it was sent, and not answered with an error (a node answers
// an error before any record).
func mayHaveLeased(err error) bool {
	var e *Error
	var op *net.OpError
	return !errors.As(err, &e) && !(errors.As(err, &op) && op.Op == "dial")
}
