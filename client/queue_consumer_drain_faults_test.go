package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestQueueConsumer_UntilEmptyFollowsAMoveBeforeEnding: partition 1 moves
// from the node the client was made with to another after the consumer
// read the owners, before its first consume. The old owner owns nothing
// of partition 1 now and answers its consumes empty (a node's topic-wide
// consume leases from the partitions it owns), but the records are on
// the new owner: io.EOF must not come before they were received.
func TestQueueConsumer_UntilEmptyFollowsAMoveBeforeEnding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newQueueNode("jobs", 2), newQueueNode("jobs", 2)
		b.elsewhere[0], b.elsewhere[1] = "http://127.0.0.1:7480", "http://127.0.0.1:7480"
		b.append(1, "b0", "b1") // partition 1's records, on the node it moves to
		cluster := queueCluster{"127.0.0.1:7480": a, "10.0.0.2:7480": b}
		var once sync.Once
		transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost {
				once.Do(func() { // the move, before the first consume is served
					a.mu.Lock()
					a.elsewhere[1] = "http://10.0.0.2:7480"
					a.mu.Unlock()
					b.mu.Lock()
					delete(b.elsewhere, 1)
					b.mu.Unlock()
				})
			}
			return cluster.RoundTrip(r)
		})
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Wait: time.Millisecond, UntilEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		got := ackUntilEOF(t, ctx, q)
		if names := names(got); !slices.Equal(names, []string{"1/0=b0", "1/1=b1"}) || b.unacked() != 0 {
			t.Fatalf("io.EOF after receiving %v, %d records of the moved partition left on its new owner", names, b.unacked())
		}
	})
}

// TestQueueConsumer_UntilEmptyFollowsAMoveBetweenOwners: partition 1
// moves from the second owner to the first after the first answered a
// consume empty and before the second answers its own: each owner's
// last consume leased nothing, yet partition 1's record was under
// neither. io.EOF must wait for a consume of the new owner sent after
// the move. The first owner is slow after its first answer (a second
// of the bubble's clock a consume), so its empty answer from before
// the move is its last for a while.
func TestQueueConsumer_UntilEmptyFollowsAMoveBetweenOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newQueueNode("jobs", 2), newQueueNode("jobs", 2)
		a.elsewhere[1] = "http://10.0.0.2:7480"
		b.elsewhere[0] = "http://127.0.0.1:7480"
		a.append(1, "m0") // partition 1's record, seen on the first owner once it moves there
		cluster := queueCluster{"127.0.0.1:7480": a, "10.0.0.2:7480": b}
		aServed := make(chan struct{})
		var aOnce, moveOnce sync.Once
		transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && r.URL.Host == "10.0.0.2:7480" {
				moveOnce.Do(func() {
					<-aServed
					a.mu.Lock()
					delete(a.elsewhere, 1)
					a.mu.Unlock()
					b.mu.Lock()
					b.elsewhere[1] = "http://127.0.0.1:7480"
					b.mu.Unlock()
				})
			}
			if r.Method == http.MethodPost && r.URL.Host == "127.0.0.1:7480" {
				select {
				case <-aServed:
					time.Sleep(time.Second) // a slow node, on the bubble's clock
				default:
				}
			}
			resp, err := cluster.RoundTrip(r)
			if r.Method == http.MethodPost && r.URL.Host == "127.0.0.1:7480" {
				aOnce.Do(func() { close(aServed) })
			}
			return resp, err
		})
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Wait: time.Millisecond, UntilEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		got := ackUntilEOF(t, ctx, q)
		if names := names(got); !slices.Equal(names, []string{"1/0=m0"}) || a.unacked() != 0 {
			t.Fatalf("io.EOF after receiving %v, %d records of the moved partition left on its new owner", names, a.unacked())
		}
	})
}

// TestQueueConsumer_NothingIsLeasedAfterEOF: once Receive answered
// io.EOF, the consumer leases nothing more while it is not closed yet
// (a caller that defers Close and goes on with other work): a record
// committed after the io.EOF is not leased, and so not hidden from
// other consumers by renewals for up to MaxHold; and Receive answers
// io.EOF again.
func TestQueueConsumer_NothingIsLeasedAfterEOF(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a")
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Wait: 50 * time.Millisecond, UntilEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		if err := q.Ack(ctx, receiveN(t, q, 1)...); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Receive(ctx); err != io.EOF {
			t.Fatalf("everything acked: %v, want io.EOF", err)
		}
		n.append(0, "later")
		time.Sleep(5 * time.Minute) // the caller's other work, on the bubble's clock
		_, extends, _ := n.counts()
		if leased := n.leased(); leased != 0 {
			t.Errorf("5 minutes after io.EOF, %d records leased to the consumer (extended %d times): hidden from every other consumer", leased, extends)
		}
		wait, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if msgs, err := q.Receive(wait); err != io.EOF {
			t.Errorf("Receive after io.EOF: %d records, %v; want io.EOF again", len(msgs), err)
		}
	})
}

// TestQueueConsumer_UntilEmptyWaitsForWhatACutAnswerLeased: the first
// consume's answer is cut inside its last record (a connection lost
// mid-answer): the node leased the records, the client got none of them
// (a failed consume). The owner's next consumes lease nothing until
// those leases run out, but the records are not consumed: io.EOF must
// not come before they were received.
func TestQueueConsumer_UntilEmptyWaitsForWhatACutAnswerLeased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a", "b", "c")
		var once sync.Once
		transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := n.RoundTrip(r)
			if err == nil && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/consume") {
				once.Do(func() {
					body, _ := io.ReadAll(resp.Body)
					resp.Body = io.NopCloser(bytes.NewReader(body[:len(body)-1]))
					resp.ContentLength = -1
				})
			}
			return resp, err
		})
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Wait: 50 * time.Millisecond, UntilEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		got := ackUntilEOF(t, ctx, q)
		if names := names(got); !slices.Equal(names, []string{"0/0=a", "0/1=b", "0/2=c"}) {
			t.Fatalf("io.EOF after receiving %v; %d records not acked (leased by the cut consume)", names, n.unacked())
		}
	})
}

// TestQueueConsumer_UntilEmptyEndsAfterAFailedConsumeThatLeasedNothing:
// the first consume fails after it was sent (no answer; it may have
// leased records) though the node leased nothing. The drain waits for
// what it may have leased to be free again, then ends. Before, an empty
// run begun before that was never begun again: io.EOF never came.
func TestQueueConsumer_UntilEmptyEndsAfterAFailedConsumeThatLeasedNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		var once sync.Once
		transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			failed := false
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/consume") {
				once.Do(func() { failed = true })
			}
			if failed {
				return nil, errors.New("connection reset by peer")
			}
			return n.RoundTrip(r)
		})
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		start := time.Now()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 30 * time.Second, Wait: time.Millisecond, UntilEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		wait, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if msgs, err := q.Receive(wait); err != io.EOF {
			t.Fatalf("nothing to lease: %d records, %v; want io.EOF", len(msgs), err)
		}
		if waited := time.Since(start); waited < 30*time.Second {
			t.Fatalf("io.EOF %v after a failed consume that may have leased for 30 s", waited)
		}
	})
}

// TestQueueConsumer_UntilEmptyEndsWithAnOwnerThatKeepsFailing: with
// UntilEmpty, an owner whose consumes all fail (no connection) is told to
// OnConsumeError each time it is retried, and after MaxConsumeFailures in
// a row Receive returns an error naming it, once the other owner's
// records were received. Before, the drain retried it for ever, quietly.
func TestQueueConsumer_UntilEmptyEndsWithAnOwnerThatKeepsFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newQueueNode("jobs", 2), newQueueNode("jobs", 2)
		a.elsewhere[1] = "http://10.0.0.2:7480"
		b.elsewhere[0] = "http://127.0.0.1:7480"
		a.append(0, "a0")
		cluster := queueCluster{"127.0.0.1:7480": a, "10.0.0.2:7480": b}
		transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host == "10.0.0.2:7480" && r.Method == http.MethodPost {
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
			}
			return cluster.RoundTrip(r)
		})
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var told []string
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Wait: time.Millisecond, UntilEmpty: true, MaxConsumeFailures: 4,
			OnConsumeError: func(node string, err error) {
				mu.Lock()
				defer mu.Unlock()
				told = append(told, node+": "+err.Error())
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		var got []*Message
		for {
			msgs, err := q.Receive(ctx)
			if err != nil {
				if err == io.EOF || !strings.Contains(err.Error(), "node 10.0.0.2:7480: 4 consumes failed in a row") || !strings.Contains(err.Error(), "connection refused") {
					t.Fatalf("an owner failing: %v; want an error naming it", err)
				}
				break
			}
			if err := q.Ack(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
			got = append(got, msgs...)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(told) != 3 || !strings.HasPrefix(told[0], "10.0.0.2:7480: ") || !strings.Contains(told[0], "connection refused") {
			t.Errorf("OnConsumeError told %q; want the 3 failures retried, naming the node", told)
		}
		if names := names(got); !slices.Equal(names, []string{"0/0=a0"}) {
			t.Errorf("received %v before the error", names)
		}
	})
}

// ackUntilEOF receives and acks until Receive says io.EOF, and returns
// what it received.
func ackUntilEOF(t *testing.T, ctx context.Context, q *QueueConsumer) []*Message {
	t.Helper()
	var got []*Message
	for {
		msgs, err := q.Receive(ctx)
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		got = append(got, msgs...)
	}
}
