package simulation

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/httpapi"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Long polls: a fetch or a read through a cursor at the high watermark
// with wait_ms (the HTTP API's, served in process by httpapi over the
// node), and a queue consume with Wait (runtime.Node.Consume). Each
// starts in a goroutine of the bubble, which settles before the run goes
// on, so every poll is parked when its waker comes: what wakes it, and
// when, is the run's, drawn from its seed.

// pendingCall is an HTTP request being served in a goroutine.
type pendingCall struct {
	rec  *httptest.ResponseRecorder
	done chan struct{}
}

// handler is the node's HTTP API, made on first use after each start.
func (r *runner) handler() *httpapi.Handler {
	if r.live.api == nil {
		r.live.api = httpapi.New(r.n, r.live.ms, zap.NewNop(), prometheus.NewRegistry(), httpapi.Options{})
	}
	return r.live.api
}

// serveAsync serves a request in a goroutine of the bubble, and returns
// once it is parked (or answered).
func (r *runner) serveAsync(method, target string) *pendingCall {
	h, req := r.handler(), httptest.NewRequest(method, target, nil)
	c := &pendingCall{rec: httptest.NewRecorder(), done: make(chan struct{})}
	goSettled(func() {
		defer close(c.done)
		h.ServeHTTP(c.rec, req)
	})
	return c
}

func fetchTarget(t *topicModel, pi int, from int64, maxRecords, waitMs int) string {
	return fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&max_records=%d&wait_ms=%d&incarnation=%s",
		t.name, pi, from, maxRecords, waitMs, t.incarnation)
}

func cursorTarget(t *topicModel, name string, pi, maxRecords, waitMs int, advance bool) string {
	return fmt.Sprintf("/v1/topics/%s/cursors/%s/partitions/%d/records?max_records=%d&wait_ms=%d&advance=%v",
		t.name, name, pi, maxRecords, waitMs, advance)
}

// longPoll parks a fetch, or a read through a cursor (made to stand at
// the high watermark), at the high watermark of one partition, checks
// that it waits, then wakes it or not: a produce to its partition must
// answer it with the records committed after it began; a produce to
// another partition must not; a delete of the topic answers it 404 at
// once; with nothing, it answers empty at its deadline.
func (r *runner) longPoll() {
	r.atRest()
	if r.anyPoisoned() {
		return // a poisoned log refuses the produces this operation counts on (check_fault.go)
	}
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	waitMs, maxRecords := 200+r.rng.IntN(5000), 1+r.rng.IntN(100)
	var name string
	var c *cursorModel
	advance := r.rng.IntN(4) > 0
	if r.rng.IntN(3) == 0 {
		name = r.cursorName()
		if c = t.cursors.get(name); c != nil && c.pos[pi] != p.committed {
			r.commitCursor(t, name, pi, p.committed)
		}
	}
	from, deadline := p.committed, time.Now().Add(time.Duration(waitMs)*time.Millisecond)
	target := fetchTarget(t, pi, from, maxRecords, waitMs)
	if name != "" {
		target = cursorTarget(t, name, pi, maxRecords, waitMs, advance)
	}
	poll := r.serveAsync("GET", target)
	r.logf("long poll %s", target)
	if name != "" && c == nil {
		if !answered(poll.done) || poll.rec.Code != http.StatusNotFound || errorCode(poll.rec) != api.CodeCursorNotFound {
			r.failf("long poll %s: a cursor never made or deleted: answered %v, %d %s", target, answered(poll.done), poll.rec.Code, poll.rec.Body)
		}
		return
	}
	r.res.Live.LongPolls++
	if answered(poll.done) {
		r.failf("long poll %s: answered before any commit: %d %s", target, poll.rec.Code, poll.rec.Body)
	}
	// What wakes the poll goes through a gate: the woken poll reads
	// between two of the node's file calls, always the same two.
	g := r.openGate()
	defer g.close()
	switch w := r.rng.IntN(6); {
	case w <= 2:
		r.produceThrough(g.retry, t, pi, 1+r.rng.IntN(50))
		g.close()
		r.checkPoll(t, pi, poll, from, p.committed, c, advance, true)
		r.res.Live.PollsWoken++
		return
	case w == 3 && len(t.parts) > 1:
		r.produceThrough(g.retry, t, (pi+1+r.rng.IntN(len(t.parts)-1))%len(t.parts), 1+r.rng.IntN(50))
		if answered(poll.done) {
			r.failf("long poll %s: answered after a commit to another partition: %d %s", target, poll.rec.Code, poll.rec.Body)
		}
	case w == 4:
		r.logf("delete %s during the long poll", t.name)
		r.must("delete "+t.name, g.retry(func() error { return r.n.DeleteTopic(r.ctx, t.name) }))
		g.close()
		if !answered(poll.done) || poll.rec.Code != http.StatusNotFound || errorCode(poll.rec) != api.CodeTopicNotFound {
			r.failf("long poll %s: a delete of the topic must answer it 404 topic_not_found at once: answered %v, %d %s",
				target, answered(poll.done), poll.rec.Code, poll.rec.Body)
		}
		r.topics = slices.DeleteFunc(r.topics, func(x *topicModel) bool { return x == t })
		r.create(t.name)
		return
	}
	g.close()
	r.logf("sleep %v, past the long poll's deadline", r.odd(time.Until(deadline)))
	r.sleep(r.odd(time.Until(deadline)))
	r.forgetExpired()
	r.checkPoll(t, pi, poll, from, p.committed, c, advance, false)
}

// readAnswer is a fetch's or a cursor read's JSON answer.
type readAnswer struct {
	Records       []api.Record `json:"records"`
	NextOffset    int64        `json:"next_offset"`
	HighWatermark int64        `json:"high_watermark"`
	Incarnation   string       `json:"incarnation"`
	Skipped       int64        `json:"skipped"`
}

// checkPoll checks a long poll's answer, woken by a commit (records from
// from on, at least one) or at its deadline (none): dense, as produced,
// each with its commit time, of the topic's incarnation, the high
// watermark the model's (or, for a poll woken while later commits went
// on, one from minHWM up). A read through cursor c advanced moves it.
func (r *runner) checkPoll(t *topicModel, pi int, poll *pendingCall, from, minHWM int64, c *cursorModel, advance, woken bool) {
	p := t.parts[pi]
	if !answered(poll.done) {
		r.failf("long poll of %s/%d from %d: not answered (woken by a commit: %v)", t.name, pi, from, woken)
	}
	var a readAnswer
	if poll.rec.Code != http.StatusOK || json.Unmarshal(poll.rec.Body.Bytes(), &a) != nil {
		r.failf("long poll of %s/%d from %d: %d %s", t.name, pi, from, poll.rec.Code, poll.rec.Body)
	}
	r.logf("long poll of %s/%d from %d answered: %d records, next %d", t.name, pi, from, len(a.Records), a.NextOffset)
	switch {
	case a.Incarnation != t.incarnation:
		r.failf("long poll of %s/%d: incarnation %s, want %s", t.name, pi, a.Incarnation, t.incarnation)
	case a.HighWatermark < minHWM || a.HighWatermark > p.committed || a.Skipped != 0:
		r.failf("long poll of %s/%d: high watermark %d, skipped %d, want %d to %d, 0", t.name, pi, a.HighWatermark, a.Skipped, minHWM, p.committed)
	case woken && len(a.Records) == 0:
		r.failf("long poll of %s/%d from %d: woken by a commit, answered no record", t.name, pi, from)
	case !woken && len(a.Records) > 0:
		r.failf("long poll of %s/%d from %d: %d records at its deadline, nothing was committed", t.name, pi, from, len(a.Records))
	case a.NextOffset != from+int64(len(a.Records)):
		r.failf("long poll of %s/%d from %d: %d records, next %d", t.name, pi, from, len(a.Records), a.NextOffset)
	}
	for i, rec := range a.Records {
		v := []byte(rec.Value)
		if rec.Encoding == "base64" {
			v, _ = base64.StdEncoding.DecodeString(rec.Value)
		}
		o := from + int64(i)
		r.checkRecord(t, pi, o, partition.ReadRecord{Offset: rec.Offset, Value: v})
		if rec.Key != nil || rec.CommittedAtMs != p.commitAt[o].UnixMilli() {
			r.failf("long poll of %s/%d: offset %d with key %v, committed at %d ms, want no key, %d ms", t.name, pi, o, rec.Key, rec.CommittedAtMs, p.commitAt[o].UnixMilli())
		}
	}
	if c != nil && advance {
		c.set(pi, a.NextOffset)
	}
}

// errorCode is an error answer's code.
func errorCode(rec *httptest.ResponseRecorder) string {
	var b api.ErrorBody
	json.Unmarshal(rec.Body.Bytes(), &b)
	return b.Error.Code
}

// waitConsume leases everything free of one partition (or of any), then
// parks one or two consumes with Wait and checks they wait; then a
// produce or a nack frees records, or nothing does. The consume that
// waited longest takes the freed records first, lowest offset first, up
// to its bound; the next takes the rest; one that gets nothing answers
// empty at its deadline. The waits end before any lease the model knows
// runs out, so nothing else frees a record meanwhile, and no call while
// they wait opens a log the budget has no room for.
func (r *runner) waitConsume() {
	r.atRest()
	if r.anyPoisoned() {
		return // a poisoned log refuses the produces this operation counts on (check_fault.go)
	}
	t := r.pick()
	part, scope := runtime.AnyPartition, []int{}
	// A consume of any partition waits only while the budget holds every
	// log of the topic: a call that evicted one would wake it (a close is
	// announced) while the call goes on, and what the woken consume
	// leased would be the scheduler's choice, not the run's. So the
	// topic's logs are opened first (another topic's give way), and the
	// produce that wakes it opens none.
	if r.rng.IntN(2) == 0 || len(t.parts) > r.maxOpen {
		part = r.rng.IntN(len(t.parts))
		scope = append(scope, part)
	} else {
		for pi := range t.parts {
			scope = append(scope, pi)
			r.must("open", retryBusy(func() error { _, err := r.n.Log(r.ctx, t.name, pi); return err }))
		}
	}
	for _, pi := range scope {
		if p := t.parts[pi]; p.committed-p.start > 8000 {
			r.logf("waiting consume of %s: skipped, %s/%d holds %d records (the lease bound is %d)", t.name, t.name, pi, p.committed-p.start, runtime.MaxLeasedPerPartition)
			return
		}
	}
	lease := r.odd(time.Duration(30+r.rng.IntN(30)) * time.Second)
	r.logf("waiting consume of %s partition %d: lease everything free", t.name, part)
	for range 50 {
		if got := r.consumeWith(t, runtime.ConsumeOptions{Partition: part, MaxRecords: 1000, MaxBytes: 1 << 30, Lease: lease}); len(got) == 0 {
			break
		}
	}
	// The waits end before idle eviction could close a log of the scope
	// (each was used just now): a waiting consume whose log closes opens
	// it again itself, beside the eviction's next close.
	wait := r.odd(time.Duration(200+r.rng.IntN(2700)) * time.Millisecond)
	if first, ok := r.firstExpiry(t, scope); ok && time.Until(first) <= wait {
		if wait = time.Until(first) - time.Millisecond; wait <= 0 {
			r.logf("waiting consume of %s: skipped, a lease runs out within a millisecond", t.name)
			return
		}
	}
	type waiter struct {
		opts runtime.ConsumeOptions
		got  []runtime.LeasedRecord
		err  error
		done chan struct{}
	}
	waiters := make([]*waiter, 1+r.rng.IntN(2))
	for i := range waiters {
		w := &waiter{opts: runtime.ConsumeOptions{Partition: part, MaxRecords: 1 + r.rng.IntN(40),
			Lease: r.odd(wait + time.Duration(1+r.rng.IntN(20))*time.Second), Wait: wait}, done: make(chan struct{})}
		waiters[i] = w
		goSettled(func() {
			defer close(w.done)
			w.got, w.err = r.n.Consume(r.ctx, t.name, w.opts)
		})
		if answered(w.done) {
			r.checkLeased(t, w.opts, w.got, w.err)
			r.failf("waiting consume of %s partition %d: answered at once with nothing free", t.name, part)
		}
	}
	deadline := time.Now().Add(wait)
	r.logf("waiting consume of %s partition %d: %d consumes wait %v", t.name, part, len(waiters), wait)
	r.res.Live.WaitConsumes += len(waiters)
	g := r.openGate() // the woken consumes lease between two of the node's file calls, always the same two
	defer g.close()
	freed := r.freeSome(g.retry, t, scope) // in the order they are leased again
	g.close()
	woken := 0
	for i, w := range waiters {
		if len(freed) == 0 {
			if answered(w.done) {
				r.checkLeased(t, w.opts, w.got, w.err)
				r.failf("waiting consume %d of %s: answered before its deadline with nothing freed", i, t.name)
			}
			continue
		}
		if !answered(w.done) {
			r.failf("waiting consume %d of %s: not woken, %d records freed (%v)", i, t.name, len(freed), freed[0])
		}
		got := r.checkLeased(t, w.opts, w.got, w.err)
		want := freed[:min(len(freed), w.opts.MaxRecords)]
		freed = freed[len(want):]
		if len(got) != len(want) {
			r.failf("waiting consume %d of %s: leased %d records, want %d, from %v", i, t.name, len(got), len(want), want[0])
		}
		for j, rec := range got {
			if (offsetRef{rec.Partition, rec.Offset}) != want[j] {
				r.failf("waiting consume %d of %s: leased %d/%d in place %d, want %v (the oldest waiter first, lowest offset first)", i, t.name, rec.Partition, rec.Offset, j, want[j])
			}
		}
		r.res.Live.ConsumesWoken++
		woken++
	}
	if woken == len(waiters) {
		return
	}
	r.logf("sleep %v, past the waiting consumes' deadline", r.odd(time.Until(deadline)))
	r.sleep(r.odd(time.Until(deadline)))
	r.forgetExpired()
	for i, w := range waiters[woken:] {
		if !answered(w.done) {
			r.failf("waiting consume %d of %s: not answered at its deadline", woken+i, t.name)
		}
		if got := r.checkLeased(t, w.opts, w.got, w.err); len(got) > 0 {
			r.failf("waiting consume %d of %s: %d records at its deadline, nothing was freed for it", woken+i, t.name, len(got))
		}
	}
}

// offsetRef is one record of a topic.
type offsetRef struct {
	Partition int
	Offset    int64
}

// firstExpiry is the earliest deadline of a lease the model holds in the
// partitions of scope that has not run out.
func (r *runner) firstExpiry(t *topicModel, scope []int) (first time.Time, ok bool) {
	now := time.Now()
	for _, pi := range scope {
		for o := range t.parts[pi].leases {
			if l, live := t.parts[pi].leasedNow(o, now); live && (!ok || l.deadline.Before(first)) {
				first, ok = l.deadline, true
			}
		}
	}
	return first, ok
}

// freeSome frees records of scope for waiting consumes: a produce of 1 to
// 30 records, a nack of some records leased under one lease id, or
// nothing; it returns them in the order a consume leases them.
func (r *runner) freeSome(call func(func() error) error, t *topicModel, scope []int) []offsetRef {
	pi := scope[r.rng.IntN(len(scope))]
	p := t.parts[pi]
	switch r.rng.IntN(5) {
	case 0, 1:
		from, count := p.committed, 1+r.rng.IntN(30)
		r.produceThrough(call, t, pi, count)
		var out []offsetRef
		for o := from; o < from+int64(count); o++ {
			out = append(out, offsetRef{pi, o})
		}
		return out
	case 2, 3:
		now := time.Now()
		var ids []uint64
		for _, o := range sortedKeys(p.leases) {
			if l, ok := p.leasedNow(o, now); ok && o >= p.start && !slices.Contains(ids, l.id) {
				ids = append(ids, l.id)
			}
		}
		if len(ids) == 0 {
			break
		}
		id := ids[r.rng.IntN(len(ids))]
		var offsets []int64
		for _, o := range sortedKeys(p.leases) {
			if l, ok := p.leasedNow(o, now); ok && l.id == id && o >= p.start && (len(offsets) == 0 || r.rng.IntN(3) > 0) {
				offsets = append(offsets, o)
			}
		}
		var given int
		err := call(func() (err error) { given, err = r.n.Nack(r.ctx, t.name, pi, id, offsets...); return err })
		r.logf("nack %s/%d lease %d %s: %d given back (%v)", t.name, pi, id, offsetsString(offsets), given, err)
		r.must("nack", err)
		if given != len(offsets) {
			r.failf("nack %s/%d lease %d: gave back %d, want %d", t.name, pi, id, given, len(offsets))
		}
		var out []offsetRef
		for _, o := range offsets {
			delete(p.leases, o)
			out = append(out, offsetRef{pi, o})
		}
		return out
	}
	r.logf("free nothing")
	return nil
}
