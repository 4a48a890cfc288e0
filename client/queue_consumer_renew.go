package client

import (
	"time"
)

// A QueueConsumer renews the lease of each record in work when a third
// of it is left, by its own clock: a lease is taken to end Lease after
// the consume (or the extension) that gave it was sent, never later than
// the node's deadline, whatever the two clocks say. One goroutine renews
// them all, one ExtendLease per partition and lease id that is due. An
// extension that answers fewer records than it named says some leases
// ended (ran out, or the partition moved and its new owner does not know
// them): each of those records is extended alone next, to learn which;
// one extended alone and not counted is lost (LeaseLost). An extension
// that fails is tried again on the client's retry schedule; a record
// whose lease reaches its end unrenewed is lost. A record is renewed up
// to MaxHold after it was leased: its last lease may run one Lease past.

// renewKey groups the records one extension names: a partition and a
// lease id, and an offset when the record is extended alone.
type renewKey struct {
	p     int
	lease uint64
	alone int64 // -1: with the others of its lease
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

// renewer extends the leases due, marks lost those that reached their
// end, and sleeps until the next is due or a consume brings more.
func (q *QueueConsumer) renewer() {
	defer q.wg.Done()
	for {
		due, next := q.dueRenewals(time.Now())
		if len(due) > 0 {
			q.extend(due)
			if q.ctx.Err() != nil { // Close: what extend left due is Close's to give back
				return
			}
			continue
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

// dueRenewals marks lost the records whose lease reached its end and
// groups those due for renewal at now; next is when the next is due, or
// reaches its end (zero: none).
func (q *QueueConsumer) dueRenewals(now time.Time) (due map[renewKey][]*Message, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	due = map[renewKey][]*Message{}
	for _, m := range q.work {
		switch {
		case m.lost:
		case !now.Before(m.deadline):
			m.lost, m.renewAt = true, time.Time{}
		case !m.renewAt.IsZero() && !now.Before(m.renewAt):
			k := renewKey{m.Partition, m.LeaseID, -1}
			if m.alone {
				k.alone = m.Offset
			}
			due[k] = append(due[k], m)
		default:
			next = earliest(next, earliest(m.renewAt, m.deadline))
		}
	}
	return due, next
}

// extend sends one extension per group and takes the answers in.
func (q *QueueConsumer) extend(due map[renewKey][]*Message) {
	for k, msgs := range due {
		offsets := make([]int64, len(msgs))
		for i, m := range msgs {
			offsets[i] = m.Offset
		}
		sent := time.Now()
		n, _, err := q.c.ExtendLease(q.ctx, q.topic, k.p, k.lease, q.opts.Lease, offsets...)
		if q.ctx.Err() != nil {
			return
		}
		q.mu.Lock()
		for _, m := range msgs {
			switch {
			case m.settled || m.lost:
			case err != nil:
				m.renewAt = time.Now().Add(retryWait(m.fails, err))
				m.fails++
			case n == len(msgs):
				m.fails, m.alone = 0, false
				m.deadline = sent.Add(q.opts.Lease)
				m.renewAt = q.renewTime(m)
			case len(msgs) == 1 || n == 0:
				m.lost, m.renewAt = true, time.Time{}
			default:
				m.alone = true // extended alone next, at once, to learn whose lease ended
			}
		}
		q.mu.Unlock()
	}
}
