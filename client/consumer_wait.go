package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/narad-io/storage/api"
)

// A Consumer that follows more partitions than it has requests in
// flight parks each partition it has read up to its high watermark, and
// waits for the parked partitions with topic-wide waits (WaitTopic): one
// per node that owns some of them, naming each at its next offset. A
// partition a wait answers ready (or not_here: another node owns it now)
// is fetched again; one that catches up is parked again. One answered
// ready whose fetch found nothing new (a node that cannot read its
// boundaries answers ready at -1), or not_here, again and again, is
// fetched on the client's retry schedule: a node's answer never makes a
// loop. Waits are
// level-triggered (a position, not a commit, is what they compare), so
// a partition named by no wait for a while loses nothing: the next wait
// naming it answers at once if it moved.
//
// Fetches go first: a wait takes a slot no due fetch wants, and at most
// limit-1 slots (one, with a limit of one) are waits. No wait is sent
// while a partition woken by one is being fetched (settling), so the
// partitions a wait woke are named by the next: one wait per node, not a
// wait sent and ended again for each of them. A partition parked while
// its node's wait is out (one that had records to read, or failed, when
// the wait went) makes that wait stale: it is ended and sent again
// naming it.
//
// A node without the endpoint (an older daemon: 404 not_found or no
// route, 405) is remembered: its idle partitions take turns of
// rotatingWait as before the wait existed. A wait's error backs off its
// node on the client's retry schedule and is Poll's to return (a
// *WaitError), as a fetch's is; one no read can mend (the topic gone or
// made again, as the consumer's incarnation says) ends the consumer.

// topicWaits are a Consumer's parked partitions and its topic-wide waits
// on them, by the node that owns them (as the client last learned it).
//
// Invariants:
//   - a parked partition is in no queue and no fetch; it is named by the
//     wait in flight to its owner (waitedBy), or is in unwaited;
//   - at most one wait to a node in flight, at most max in all, each
//     holding one of the consumer's slots (inFlight counts it);
//   - settling counts the partitions woken (or not read yet) whose
//     fetch has not answered: while any is, no wait is sent, nor one
//     ended as stale;
//   - a node with noWait set gets no wait again.
type topicWaits struct {
	parked   int
	unwaited []*partitionRead
	calls    map[string]*waitCall  // in flight, by node ("" the client's own)
	nodes    map[string]*nodeWaits // by node, made on first use
	settling int
	max      int
}

// nodeWaits is what a consumer keeps of one node's waits.
type nodeWaits struct {
	noWait    bool      // the node has no topic-wide wait: its idle partitions take turns
	failures  int       // waits failed in a row
	notBefore time.Time // after a failure: when it may be asked again
	lastEnd   time.Time // its last wait's end: nodes that want a slot go longest-waiting first
}

// waitCall is a topic-wide wait in flight.
type waitCall struct {
	node    string
	url     *url.URL // nil: the client's own node
	parts   []*partitionRead
	cancel  context.CancelFunc
	long    bool // it waits longer than a turn
	dropped bool // the consumer ended it: its partitions are waited on again, nothing failed
}

func newTopicWaits(limit, partitions int) *topicWaits {
	return &topicWaits{max: max(1, limit-1), settling: partitions, calls: map[string]*waitCall{}, nodes: map[string]*nodeWaits{}}
}

func (w *topicWaits) owner(node string) *nodeWaits {
	o := w.nodes[node]
	if o == nil {
		o = &nodeWaits{}
		w.nodes[node] = o
	}
	return o
}

// park takes a partition read up to its high watermark out of fetching.
func (w *topicWaits) park(st *partitionRead) {
	st.parked = true
	w.parked++
	w.unwaited = append(w.unwaited, st)
}

// preempt ends a wait so that a fetch due gets its slot.
func (w *topicWaits) preempt() {
	for _, call := range w.calls {
		if !call.dropped {
			call.dropped = true
			call.cancel()
			return
		}
	}
}

// partitionKey is how the client keys a partition's owner.
func partitionKey(topic string, p int) string {
	return url.PathEscape(topic) + "/" + strconv.Itoa(p)
}

// ownerOf names the node the client sends st's calls to: "" for its own.
func (k *Consumer) ownerOf(st *partitionRead) string {
	u := k.ownerURL(st)
	if u == nil {
		return ""
	}
	return u.String()
}

func (k *Consumer) ownerURL(st *partitionRead) *url.URL {
	if u, ok := k.c.owners.Load(st.key); ok && u.(*url.URL).String() != k.c.base.String() {
		return u.(*url.URL)
	}
	return nil
}

// launchWaits sends a wait to each node that owns unwaited parked
// partitions, in the slots the fetches left, longest-waiting node first;
// a node whose wait in flight is stale has it ended. With more nodes to
// wait on than waits may be in flight, the waits are turns (rotatingWait)
// and the long ones in flight are ended. wake is when a node's backoff
// ahead passes; queued is true when partitions of a node without the
// wait went back to fetching. k.mu is held.
func (k *Consumer) launchWaits(now time.Time) (wake time.Time, queued bool) {
	w := k.waits
	if w.settling > 0 || len(w.unwaited) == 0 {
		return time.Time{}, false
	}
	groups := map[string][]*partitionRead{}
	urls := map[string]*url.URL{}
	var want []string
	for _, st := range w.unwaited {
		node := k.ownerOf(st)
		if w.owner(node).noWait {
			k.unpark(st)
			queued = true
			continue
		}
		if groups[node] == nil {
			urls[node] = k.ownerURL(st)
			want = append(want, node)
		}
		groups[node] = append(groups[node], st)
	}
	w.unwaited = w.unwaited[:0]
	ready := want[:0]
	for _, node := range want {
		switch o := w.owner(node); {
		case w.calls[node] != nil:
			if call := w.calls[node]; !call.dropped { // stale: it does not name groups[node]
				call.dropped = true
				call.cancel()
			}
		case now.Before(o.notBefore):
			wake = earliest(wake, o.notBefore)
		default:
			ready = append(ready, node)
			continue
		}
		w.unwaited = append(w.unwaited, groups[node]...)
	}
	wait := k.opts.Wait
	if len(w.calls)+len(ready) > w.max {
		wait = min(wait, rotatingWait)
		for _, call := range w.calls {
			if call.long && !call.dropped {
				call.dropped = true
				call.cancel()
			}
		}
	}
	slices.SortStableFunc(ready, func(a, b string) int { return w.owner(a).lastEnd.Compare(w.owner(b).lastEnd) })
	for _, node := range ready {
		if k.inFlight == k.limit || len(w.calls) == w.max {
			w.unwaited = append(w.unwaited, groups[node]...)
			continue
		}
		k.sendWait(node, urls[node], groups[node], wait)
	}
	return wake, queued
}

// sendWait starts a wait on parts at node. k.mu is held.
func (k *Consumer) sendWait(node string, u *url.URL, parts []*partitionRead, wait time.Duration) {
	ctx, cancel := context.WithCancel(k.ctx)
	call := &waitCall{node: node, url: u, parts: parts, cancel: cancel, long: wait > rotatingWait}
	positions := make(map[int]int64, len(parts))
	for _, st := range parts {
		positions[st.p] = st.next
		st.waitedBy = call
	}
	k.waits.calls[node] = call
	k.inFlight++
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer cancel()
		res, err := k.c.waitTopic(ctx, u, k.topic, positions, wait, k.incarnation)
		k.results <- fetched{wait: call, waited: res, err: err}
	}()
}

// unpark puts a parked partition back to fetching.
func (k *Consumer) unpark(st *partitionRead) {
	st.parked = false
	k.waits.parked--
	k.queue = append(k.queue, st)
}

// waitDone takes a wait's outcome: the partitions it found ready or
// not here go back to fetching (caught up no more: fetched at once), the
// others are parked for the next wait. deliver is true when Poll returns
// err.
func (k *Consumer) waitDone(f fetched) (err error, deliver bool) {
	w, call := k.waits, f.wait
	delete(w.calls, call.node)
	o := w.owner(call.node)
	o.lastEnd = time.Now()
	for _, st := range call.parts {
		st.waitedBy = nil
	}
	if call.dropped {
		w.unwaited = append(w.unwaited, call.parts...)
		return nil, false
	}
	if f.err != nil {
		return k.waitFailed(call, o, f.err)
	}
	o.failures, o.notBefore = 0, time.Time{}
	ready := map[int]bool{}
	for _, r := range f.waited.Ready {
		ready[r.Partition] = true
	}
	notHere := map[int]bool{}
	for _, p := range f.waited.NotHere {
		notHere[p] = true
	}
	now := time.Now()
	for _, st := range call.parts {
		switch {
		case ready[st.p] && st.idleWakes > 0:
			// Ready again, though its last fetch found nothing new (a
			// node that cannot read its boundaries answers ready at -1):
			// fetched on the retry schedule, never in a loop.
			st.notHere = 0
			k.unpark(st)
			st.notBefore = now.Add(retryWait(st.idleWakes-1, nil))
			st.caughtUp, st.woken = false, true
			continue
		case ready[st.p]:
			st.notHere = 0
			st.woken = true
		case notHere[st.p]:
			// Another node owns it: its fetch follows the 421 there, and
			// it is parked with that node. A node that says not_here
			// again and again (its fetch served where the wait was
			// asked) is asked on the retry schedule, never in a loop.
			st.notHere++
			if st.notHere > 1 {
				k.unpark(st)
				st.notBefore = now.Add(retryWait(st.notHere-2, nil))
				st.caughtUp = false
				continue
			}
		default:
			st.notHere, st.idleWakes = 0, 0 // the node knows it is at next
			w.unwaited = append(w.unwaited, st)
			continue
		}
		k.unpark(st)
		st.caughtUp = false
		st.settling = true
		w.settling++
	}
	return nil, false
}

// waitFailed takes a wait's error: a node without the endpoint has its
// partitions fetched in turns from then on; an error no read can mend
// ends the consumer; any other backs the node off (and, when the node
// could not be reached or is fenced, forgets it as the owner of the
// partitions, whose next wait asks the client's own node).
func (k *Consumer) waitFailed(call *waitCall, o *nodeWaits, err error) (error, bool) {
	if unsupported(err) {
		o.noWait = true
		for _, st := range call.parts {
			k.unpark(st)
		}
		return nil, false
	}
	ps := make([]int, len(call.parts))
	for i, st := range call.parts {
		ps[i] = st.p
	}
	we := &WaitError{Topic: k.topic, Node: call.node, Partitions: ps, Err: err}
	if terminal(err) {
		k.err = we
		return we, true
	}
	var e *Error
	if call.url != nil && (!errors.As(err, &e) || errors.Is(err, ErrFenced)) {
		// By address: each partition's owner came from a 421 of its own,
		// a *url.URL of its own.
		for _, st := range call.parts {
			if u, ok := k.c.owners.Load(st.key); ok && u.(*url.URL).String() == call.node {
				k.c.owners.CompareAndDelete(st.key, u)
			}
		}
	}
	o.notBefore = time.Now().Add(retryWait(o.failures, err))
	o.failures++
	k.waits.unwaited = append(k.waits.unwaited, call.parts...)
	return we, true
}

// unsupported is true of a node's answer that it has no topic-wide wait:
// no such route (not_found, or a plain 404), or not with POST.
func unsupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && ((e.Status == http.StatusNotFound && (e.Code == api.CodeNotFound || e.Code == "http_404")) ||
		e.Status == http.StatusMethodNotAllowed)
}

// WaitError is a Consumer's error in a topic-wide wait on its idle
// partitions at one node (Node, "" for the node the client was made
// with): Poll waits on them again once a backoff has passed, unless the
// error is terminal (Poll says which), when every later Poll returns it.
type WaitError struct {
	Topic      string
	Node       string
	Partitions []int
	Err        error
}

func (e *WaitError) Error() string {
	node := ""
	if e.Node != "" {
		node = " at " + e.Node
	}
	return fmt.Sprintf("narad: consumer of %s, waiting on %d idle partitions%s: %v", e.Topic, len(e.Partitions), node, e.Err)
}

func (e *WaitError) Unwrap() error { return e.Err }
