package client

import (
	"context"
	"errors"
	"time"
)

// A QueueConsumer renews the lease of each record in work when a third
// of it is left, by its own clock: a lease is taken to end Lease after
// the consume (or the extension) that gave it was sent, never later than
// the node's deadline, whatever the two clocks say. One goroutine finds
// what is due and sends one ExtendLease per partition and lease id, each
// from a goroutine of its own, at most renewSlots at once to a node, each
// given up when the earliest lease it names ends, waiting for a slot
// included: a node that hangs holds up no other node's renewals. An
// extension that answers fewer records than it named says some leases
// ended (ran out, or the partition moved and its new owner does not know
// them): its records are split in halves, each extended at once, to
// learn which (a record alone and not counted is lost, LeaseLost): k
// leases ended among n records cost about k log n extensions. A record
// being acked or nacked is still renewed (its ack may take longer than
// its lease has left, and fail), but in an extension of its own part:
// an ack landing first makes that one short, not the others'; a record
// being settled that an extension does not count is tried again, not
// lost, until its settling ends or its lease does. An extension
// that fails is tried again on the client's retry schedule, but for one
// that finds the topic or the partition gone: its records are lost at
// once. A record
// whose lease reaches its end unrenewed is lost. A record is renewed up
// to MaxHold after it was leased: its last lease may run one Lease past.

// renewKey groups the records one extension names: a partition and a
// lease id, and the part of it a short extension split them into.
type renewKey struct {
	p        int
	lease    uint64
	part     uint64 // 0: with the others of its lease
	settling bool   // its records are being acked or nacked: extended apart
}

// renewTime is when m is renewed next: a third of its lease left, unless
// that is MaxHold after it was leased (zero: never).
func (q *QueueConsumer) renewTime(m *Message) time.Time {
	at := m.deadline.Add(-q.opts.Lease / 3)
	if !at.Before(m.leasedAt.Add(q.opts.MaxHold)) {
		return time.Time{}
	}
	return at
}

// wakeRenewer has the renewer look at the records in work again.
func (q *QueueConsumer) wakeRenewer() {
	select {
	case q.renewWake <- struct{}{}:
	default:
	}
}

// renewer marks lost the records whose lease reached its end, starts
// an extension for each group due, and sleeps until the next is due, an
// extension ends or a consume brings more.
func (q *QueueConsumer) renewer() {
	defer q.wg.Done()
	for {
		due, next := q.dueRenewals(time.Now())
		for _, g := range due {
			q.wg.Add(1)
			go q.extend(g)
		}
		var at <-chan time.Time
		var t *time.Timer
		if !next.IsZero() {
			t = time.NewTimer(time.Until(next))
			at = t.C
		}
		select {
		case <-q.ctx.Done():
		case <-at:
		case <-q.renewWake:
		}
		if t != nil {
			t.Stop()
		}
		if q.ctx.Err() != nil {
			return
		}
	}
}

// renewal is one extension's records: one partition's, of one lease.
type renewal struct {
	key  renewKey
	msgs []*Message
	by   time.Time // the earliest deadline of msgs: the extension is given up then
}

// dueRenewals marks lost the records whose lease reached its end and
// groups those due for renewal at now, marking them extending; next is
// when the next is due, or reaches its end (zero: none). A record being
// extended is left to its extension, which wakes the renewer.
func (q *QueueConsumer) dueRenewals(now time.Time) (due map[renewKey]*renewal, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	due = map[renewKey]*renewal{}
	for _, m := range q.work {
		switch {
		case m.lost || m.extending:
		case !now.Before(m.deadline):
			q.lose(m)
			q.freed(m.freeBy)
		case !m.renewAt.IsZero() && !now.Before(m.renewAt):
			k := renewKey{m.Partition, m.LeaseID, m.part, m.settling > 0}
			g := due[k]
			if g == nil {
				g = &renewal{key: k, by: m.deadline}
				due[k] = g
			}
			g.msgs = append(g.msgs, m)
			g.by = earliest(g.by, m.deadline)
			m.extending = true
		default:
			next = earliest(next, earliest(m.renewAt, m.deadline))
		}
	}
	return due, next
}

// renewSlots bounds the extensions in flight at once to one node.
const renewSlots = 8

// slotsOf is the slots of the extensions of partition p's records: its
// owner's, as the last description the consumer read names it (a
// partition that moved since is still counted at its old owner's until
// the next). A node that hangs holds its own slots only.
func (q *QueueConsumer) slotsOf(p int) chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	node := q.owners[p]
	s := q.renewing[node]
	if s == nil {
		s = make(chan struct{}, renewSlots)
		q.renewing[node] = s
	}
	return s
}

// extend sends g's extension when a slot of its node is free, both
// given up at g.by (its records' leases end then: a node that does not
// answer holds up no other), and takes the answer in.
func (q *QueueConsumer) extend(g *renewal) {
	defer q.wg.Done()
	defer q.wakeRenewer()
	var n int
	sent := time.Now()
	ctx, cancel := context.WithDeadline(q.ctx, g.by)
	defer cancel()
	slots := q.slotsOf(g.key.p)
	var err error
	select {
	case slots <- struct{}{}:
		offsets := make([]int64, len(g.msgs))
		for i, m := range g.msgs {
			offsets[i] = m.Offset
		}
		sent = time.Now()
		n, _, err = q.c.ExtendLease(ctx, q.topic, g.key.p, g.key.lease, q.opts.Lease, offsets...)
		<-slots
	case <-ctx.Done():
		err = ctx.Err()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var short []*Message
	for _, m := range g.msgs {
		m.extending = false
		switch {
		case m.settled || m.lost || q.ctx.Err() != nil: // closing: Close gives it back
		case errors.Is(err, ErrTopicNotFound) || errors.Is(err, ErrPartitionNotFound):
			q.lose(m) // no lease of it is left to extend
			q.freed(time.Now())
		case err != nil:
			m.renewAt = time.Now().Add(retryWait(m.fails, err))
			m.fails++
		case n == len(g.msgs):
			m.fails, m.part = 0, 0
			m.deadline, m.freeBy = sent.Add(q.opts.Lease), time.Now().Add(q.opts.Lease)
			m.renewAt = q.renewTime(m)
		case m.settling > 0 && (len(g.msgs) == 1 || n == 0):
			// Its ack or nack may have landed first: it is not lost for
			// that. Tried again, unless the settling ends first; its
			// lease's end without either loses it.
			m.renewAt = time.Now().Add(retryWait(m.fails, nil))
			m.fails++
		case len(g.msgs) == 1 || n == 0:
			q.lose(m)
			q.freed(time.Now()) // the node knows no lease of it: free now
		default:
			short = append(short, m)
		}
	}
	// Some of short had their lease end: each half is extended next, at
	// once, to learn which.
	half := (len(short) + 1) / 2
	for i, m := range short {
		m.part = q.parts + 1
		if i >= half {
			m.part = q.parts + 2
		}
		m.renewAt = time.Now()
	}
	if len(short) > 0 {
		q.parts += 2
	}
}
