package client

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"
)

// senderIdle is how long a partition's sender (and its connection)
// stays with nothing to send before it ends; the partition's next record
// starts another.
const senderIdle = 30 * time.Second

// sender sends one partition's batches over a link and gives their
// results, oldest first. One goroutine runs it; what it shares with
// Produce (the partition's open batch and ready queue) is under the
// Producer's mu, the rest is its own.
//
// Invariants:
//   - inflight holds the batches taken and not yet settled, in the order
//     they were taken: each sent on the link and awaiting its answer
//     (out nil), answered (out set), or failed without a request (final).
//   - Only inflight's first batch is settled: results come in the order
//     the records were taken.
//   - A batch is sent again only once every batch taken after it is
//     answered, and only when none of those was committed: sent again
//     behind a committed one, its records would take offsets after
//     records taken after them. With one link (HTTP/1.1, pipelined) a
//     node handles a link's requests in the order they were written, so
//     commits follow the order batches were taken.
//   - While careful (after a batch was sent again, until a commit), one
//     request is in flight: a second failure cannot come behind a
//     commit.
type sender struct {
	p         *Producer
	pt        *part
	key       string // the client's owner cache key: "topic/partition" as in the path
	path      string // the produce path
	link      link   // nil until the next send dials
	answers   chan reply
	inflight  []*batch
	careful   bool
	notBefore time.Time // no send before it: a backoff
	// outcomeSet: a batch got its outcome without a request (a dial or a
	// write that failed, a final error): settle runs again before the
	// loop waits, as no answer will wake it for that batch.
	outcomeSet bool
}

func newSender(p *Producer, pt *part) *sender {
	return &sender{p: p, pt: pt, key: url.PathEscape(p.topic) + "/" + strconv.Itoa(pt.id),
		path: partitionPath(p.topic, pt.id) + "/records", answers: make(chan reply, p.opts.MaxInFlight)}
}

// run is the sender's goroutine: it ends when the partition has had
// nothing to send for senderIdle, or nothing at all once the producer is
// closing, or at once when a Close's context ends (abort).
func (s *sender) run() {
	defer s.p.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	idleFired := false
	for {
		s.settle()
		s.sendReady()
		if s.outcomeSet {
			s.outcomeSet = false
			continue
		}
		p := s.p
		p.mu.Lock()
		empty := len(s.inflight) == 0 && s.pt.open == nil && len(s.pt.ready) == 0
		if empty && (p.closing || idleFired) {
			s.pt.running = false
			p.mu.Unlock()
			s.closeLink()
			return
		}
		var due time.Time
		switch {
		case empty:
			due = time.Now().Add(senderIdle)
		case s.notBefore.After(time.Now()):
			due = s.notBefore
		case s.pt.open != nil && len(s.pt.ready) == 0 && len(s.inflight) < s.limit():
			due = s.pt.open.opened.Add(p.opts.Linger)
		}
		p.mu.Unlock()
		var closed <-chan struct{}
		if empty {
			closed = p.closed
		}
		if !due.IsZero() {
			timer.Reset(time.Until(due))
		}
		idleFired = false
		select {
		case a := <-s.answers:
			s.apply(a)
		case <-s.pt.wake:
		case <-closed:
		case <-timer.C:
			idleFired = empty
		case <-p.ctx.Done():
			timer.Stop()
			s.abort()
			return
		}
		timer.Stop()
	}
}

// limit is how many requests may be in flight.
func (s *sender) limit() int {
	if s.careful || !s.p.pipelined {
		return 1
	}
	return s.p.opts.MaxInFlight
}

// sendReady sends ready batches (and the open one once its linger is
// over) while there is room in flight and no backoff holds them.
func (s *sender) sendReady() {
	for len(s.inflight) < s.limit() && !time.Now().Before(s.notBefore) {
		b := s.take()
		if b == nil {
			return
		}
		if b.final != nil {
			if len(s.inflight) == 0 {
				s.done(b, -1, b.final)
				continue
			}
			b.out = &outcome{kind: failed, err: b.final} // settled in its turn
			s.inflight = append(s.inflight, b)
			s.outcomeSet = true
			continue
		}
		s.send(b)
	}
}

// take is the partition's next batch to send, or nil.
func (s *sender) take() *batch {
	p, pt := s.p, s.pt
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(pt.ready) > 0 {
		b := pt.ready[0]
		pt.ready[0] = nil
		pt.ready = pt.ready[1:]
		return b
	}
	if b := pt.open; b != nil && time.Since(b.opened) >= p.opts.Linger {
		pt.open = nil
		return b
	}
	return nil
}

// send sends b on the link, dialing one if there is none. A batch the
// link did not take gets its outcome at once.
func (s *sender) send(b *batch) {
	s.inflight = append(s.inflight, b)
	if s.link == nil {
		l, err := s.dial()
		if err != nil {
			b.out = &outcome{kind: nothingDone, err: err}
			s.outcomeSet = true
			return
		}
		s.link = l
	}
	if err := s.link.send(b); err != nil {
		k := nothingDone
		if errors.Is(err, errLinkBroken) {
			k = notProcessed
		}
		b.out = &outcome{kind: k, err: err}
		s.outcomeSet = true
		s.closeLink()
		return
	}
	s.p.stats.requests.Add(1)
}

// dial opens a link to the partition's owner when the client knows it,
// else to the node the client was made with. An owner that cannot be
// reached is forgotten.
func (s *sender) dial() (link, error) {
	c := s.p.c
	base, remembered := c.base, false
	if u, ok := c.owners.Load(s.key); ok {
		base, remembered = u.(*url.URL), true
	}
	if !s.p.pipelined {
		return newRoundTripLink(s.p.ctx, c, base, s.path, s.answers), nil
	}
	l, err := dialPipe(s.p.ctx, c, base, s.path, s.answers)
	if err != nil && remembered && s.p.ctx.Err() == nil {
		c.owners.CompareAndDelete(s.key, base)
	}
	return l, err
}

func (s *sender) closeLink() {
	if s.link != nil {
		s.link.close()
		s.link = nil
	}
}

// apply takes an answer. A remembered owner that could not be reached or
// answered 503 fenced is forgotten, as Client.do does.
func (s *sender) apply(a reply) {
	a.b.out = &a.out
	var e *Error
	if a.out.kind == ambiguous && (!errors.As(a.out.err, &e) || errors.Is(e, ErrFenced)) && s.p.ctx.Err() == nil {
		if u, ok := s.p.c.owners.Load(s.key); ok {
			s.p.c.owners.CompareAndDelete(s.key, u)
		}
	}
}

// settle gives the results of the oldest batches that have them, and
// sends again what may be sent again once everything after it is
// answered.
func (s *sender) settle() {
	for len(s.inflight) > 0 {
		head := s.inflight[0]
		if head.out == nil {
			return
		}
		switch {
		case head.out.kind == committed:
			s.careful = false
			s.pop()
			s.done(head, head.out.res.BaseOffset, nil)
			continue
		case !head.out.retriable(s.p.opts.RetryAmbiguous):
			s.pop()
			s.done(head, -1, head.out.errOf())
			continue
		}
		for _, b := range s.inflight[1:] {
			if b.out == nil {
				return // decided once the later ones are answered
			}
		}
		s.sendAgain()
		return
	}
}

func (s *sender) pop() {
	s.inflight[0] = nil
	s.inflight = s.inflight[1:]
}

// sendAgain runs when the oldest batch in flight may be sent again and
// every batch is answered. Up to the last batch that was committed or may
// have been (ambiguous) everything is settled: a batch answered nothing
// done before it fails with ErrNotResent, since sent again it would land
// after a batch that may be stored; an ambiguous batch before the last
// committed one fails, one after it is sent again with RetryAmbiguous.
// The batches after the cut, none committed nor ambiguous, go back to the
// front of the ready queue in their order, to be sent one at a time
// (careful) after the backoff the answers ask for.
func (s *sender) sendAgain() {
	committedTo, last := -1, -1
	for i, b := range s.inflight {
		switch b.out.kind {
		case committed:
			committedTo, last = i, i
		case ambiguous:
			last = i
		}
	}
	ra := s.p.opts.RetryAmbiguous
	var again []*batch
	for i, b := range s.inflight {
		o := b.out
		switch {
		case i > last:
			again = append(again, b)
		case o.kind == committed:
			s.done(b, o.res.BaseOffset, nil)
		case o.kind == ambiguous && ra && i > committedTo:
			again = append(again, b)
		case o.retriable(ra) && o.kind != ambiguous:
			s.done(b, -1, &batchError{kind: ErrNotResent, err: o.err})
		default:
			s.done(b, -1, o.errOf())
		}
	}
	clear(s.inflight)
	s.inflight = s.inflight[:0]
	var wait time.Duration
	for _, b := range again {
		o := *b.out
		b.out = nil
		switch {
		case !o.retriable(ra):
			b.final = o.errOf()
		case o.kind == redirected:
			if b.hops++; b.hops > maxRedirects {
				b.final = o.err
				break
			}
			s.p.c.owners.Store(s.key, o.owner)
			s.closeLink()
		case o.kind == nothingDone || o.kind == ambiguous:
			if b.attempts >= s.p.c.retries {
				b.final = o.errOf()
				break
			}
			wait = max(wait, retryWait(b.attempts, o.err))
			b.attempts++
			if o.kind == ambiguous {
				s.closeLink()
			}
		}
		if b.final == nil {
			s.p.stats.retries.Add(1)
		}
	}
	if wait > 0 {
		s.notBefore = time.Now().Add(wait)
	}
	s.careful = len(again) > 0
	s.p.mu.Lock()
	s.pt.ready = append(again, s.pt.ready...)
	s.p.mu.Unlock()
}

// done settles b: its bytes back to the buffer, then each record's
// result (offsets from base, or err), then its records counted settled.
func (s *sender) done(b *batch, base int64, err error) {
	p := s.p
	p.mu.Lock()
	p.buffered -= b.size
	close(p.room)
	p.room = make(chan struct{})
	p.mu.Unlock()
	if err == nil {
		p.stats.committed.Add(1)
		p.stats.acked.Add(int64(b.records))
	} else {
		p.stats.failed.Add(int64(b.records))
		if isTopicGone(err) {
			p.refresh() // before the results: their callers see the new count
		}
	}
	for i, f := range b.done {
		if f == nil {
			continue
		}
		r := Result{Partition: b.part, Offset: -1, Err: err}
		if err == nil {
			r.Offset = base + int64(i)
		}
		f(r)
	}
	p.mu.Lock()
	s.pt.settled += int64(b.records)
	close(p.settledCh)
	p.settledCh = make(chan struct{})
	p.mu.Unlock()
	if p.pipelined {
		p.bodies.put(b.body)
	}
	b.body = nil
}

// abort ends the sender when a Close's context ended: its link closed
// (what was awaited is abandoned: ErrAmbiguous), the batches that were
// never committed and not in flight failed with ErrProducerClosed.
func (s *sender) abort() {
	p := s.p
	cause := context.Cause(p.ctx)
	var awaited []*batch
	for _, b := range s.inflight {
		if b.out == nil {
			awaited = append(awaited, b)
		}
	}
	s.closeLink()
	for drained := false; !drained; {
		select {
		case a := <-s.answers:
			s.apply(a)
		default:
			drained = true
		}
	}
	for _, b := range awaited {
		if b.out == nil || b.out.kind == ambiguous {
			b.out = &outcome{kind: ambiguous, err: cause}
		}
	}
	for _, b := range s.inflight {
		o := b.out
		switch {
		case o.kind == committed:
			s.done(b, o.res.BaseOffset, nil)
		case o.kind == ambiguous:
			p.aborted.inFlight.Add(int64(b.records))
			s.done(b, -1, o.errOf())
		case o.retriable(false):
			p.aborted.unsent.Add(int64(b.records))
			s.done(b, -1, &batchError{kind: ErrProducerClosed, err: o.err})
		default:
			s.done(b, -1, o.errOf())
		}
	}
	s.inflight = nil
	p.mu.Lock()
	left := s.pt.ready
	if s.pt.open != nil {
		left = append(left, s.pt.open)
	}
	s.pt.ready, s.pt.open, s.pt.running = nil, nil, false
	p.mu.Unlock()
	for _, b := range left {
		if b.final != nil {
			s.done(b, -1, b.final)
			continue
		}
		p.aborted.unsent.Add(int64(b.records))
		s.done(b, -1, &batchError{kind: ErrProducerClosed, err: cause})
	}
}
