package client

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// heldConsumes is a transport to n whose consumes, once hold is set,
// wait for release before they reach the node: a consume in flight, slow.
func heldConsumes(n *queueNode, hold *atomic.Bool, release <-chan struct{}) *Client {
	transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if hold.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/consume") {
			select {
			case <-release:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
		return n.RoundTrip(r)
	})
	c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		panic(err)
	}
	return c
}

// runCounted reports that the loop of the client's own node has an
// empty run that an owners read confirmed (what drained asks of it).
func runCounted(q *QueueConsumer) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.loops[""]
	return l != nil && l.emptyRun(q.ownersGen) && q.ownersReadAt >= l.emptyAt
}

// TestQueueConsumer_UntilEmptyRedeliversWhatItNacked: with UntilEmpty,
// a record received and nacked is given back for redelivery now: it is
// left to lease, so io.EOF must not come before it was received again.
// The owner's empty answers from while the record was leased (a run
// that counted) say nothing of it.
func TestQueueConsumer_UntilEmptyRedeliversWhatItNacked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a")
		var hold atomic.Bool
		release := make(chan struct{})
		ctx := context.Background()
		q, err := heldConsumes(n, &hold, release).NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Wait: time.Millisecond, UntilEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		msgs := receiveN(t, q, 1)
		for !q.Drained() { // the owner answered empty while a was leased, confirmed
			time.Sleep(time.Millisecond)
		}
		hold.Store(true)
		time.Sleep(10 * time.Millisecond) // the consumes in the node answer; the next waits
		synctest.Wait()
		if err := q.Nack(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(time.Second, func() { close(release) })
		again, err := q.Receive(ctx)
		if err != nil {
			t.Fatalf("a nacked, free to lease again: Receive %v; want it redelivered (unacked on the node: %d)", err, n.unacked())
		}
		if err := q.Ack(ctx, again...); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Receive(ctx); err != io.EOF {
			t.Fatalf("everything acked: %v, want io.EOF", err)
		}
		if left := n.unacked(); left != 0 {
			t.Fatalf("io.EOF with %d records not acked", left)
		}
	})
}

// TestQueueConsumer_UntilEmptyWaitsForWhatALostLeaseFreed: records
// leased and not received yet (ready) whose lease the node no longer
// knows (it restarted) are lost, taken out of ready: they are free on
// the node, never handed out. io.EOF must not come before they were
// received: the owner's empty answers from while they were leased say
// nothing of them.
func TestQueueConsumer_UntilEmptyWaitsForWhatALostLeaseFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a", "b")
		var hold atomic.Bool
		release := make(chan struct{})
		ctx := context.Background()
		q, err := heldConsumes(n, &hold, release).NewQueueConsumer(ctx, "jobs",
			QueueConsumerOptions{MaxRecords: 1, Lease: 3 * time.Second, Wait: time.Millisecond, UntilEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		first := receiveN(t, q, 1) // a; b is leased too, ready
		for !runCounted(q) {
			time.Sleep(time.Millisecond)
		}
		hold.Store(true)
		time.Sleep(10 * time.Millisecond) // the consumes in the node answer; the next waits
		synctest.Wait()
		n.mu.Lock() // the node restarts: it forgets its leases
		for _, rec := range n.parts[0] {
			rec.given = true
		}
		n.mu.Unlock()
		if err := q.Ack(ctx, first...); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // b's renewal finds its lease gone: b is lost
		time.AfterFunc(time.Second, func() { close(release) })
		msgs, err := q.Receive(ctx)
		if err != nil {
			t.Fatalf("b lost before it was received, free on the node: Receive %v; want it (unacked on the node: %d)", err, n.unacked())
		}
		if names := names(msgs); len(names) != 1 || names[0] != "0/1=b" {
			t.Fatalf("received %v, want b", names)
		}
	})
}
