package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestQueueConsumer_UntilEmptyEndsWhenEveryOwnerLeasedNothing: with
// UntilEmpty, a consumer of a topic over two owners receives every record
// of both (more than one consume's worth), and Receive answers io.EOF
// only after each owner's last consume leased nothing, with nothing in
// work: not while a record received is unsettled, and not while an
// owner's consumes fail (its partition is not known to be empty).
func TestQueueConsumer_UntilEmptyEndsWhenEveryOwnerLeasedNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newQueueNode("jobs", 2), newQueueNode("jobs", 2)
		a.elsewhere[1] = "http://10.0.0.2:7480"
		b.elsewhere[0] = "http://127.0.0.1:7480"
		a.append(0, "a0", "a1", "a2", "a3", "a4")
		b.append(1, "b0", "b1", "b2")
		var bDown atomic.Bool
		bDown.Store(true) // the second owner does not answer at first
		cluster := queueCluster{"127.0.0.1:7480": a, "10.0.0.2:7480": b}
		transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host == "10.0.0.2:7480" && bDown.Load() {
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
			}
			return cluster.RoundTrip(r)
		})
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{MaxRecords: 2, Wait: time.Millisecond, UntilEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		var got []*Message
		for len(got) < 5 {
			msgs, err := q.Receive(ctx)
			if err != nil {
				t.Fatalf("after %d records of the first owner: %v", len(got), err)
			}
			if err := q.Ack(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
			got = append(got, msgs...)
		}
		// The first owner is empty now and the second still fails: Receive
		// waits (two seconds of the bubble's clock pass without io.EOF).
		wait, cancel := context.WithTimeout(ctx, 2*time.Second)
		msgs, err := q.Receive(wait)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || q.Drained() {
			t.Fatalf("with an owner failing: %d records, %v (drained %v); want the wait to run out", len(msgs), err, q.Drained())
		}
		bDown.Store(false)
		var held []*Message
		for len(held) < 3 {
			msgs, err := q.Receive(ctx)
			if err != nil {
				t.Fatalf("the second owner back, after %d of its records: %v", len(held), err)
			}
			held = append(held, msgs...)
		}
		// Received and not settled: not empty, though both owners lease
		// nothing now.
		wait, cancel = context.WithTimeout(ctx, 2*time.Second)
		msgs, err = q.Receive(wait)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !q.Drained() {
			t.Fatalf("with %d records received and not settled: %d more, %v (drained %v); want a wait", len(held), len(msgs), err, q.Drained())
		}
		if err := q.Ack(ctx, held...); err != nil {
			t.Fatal(err)
		}
		got = append(got, held...)
		if msgs, err := q.Receive(ctx); err != io.EOF {
			t.Fatalf("everything acked and every owner empty: %d records, %v; want io.EOF", len(msgs), err)
		}
		want := []string{"0/0=a0", "0/1=a1", "0/2=a2", "0/3=a3", "0/4=a4", "1/0=b0", "1/1=b1", "1/2=b2"}
		if names := names(got); !slices.Equal(names, want) || a.unacked() != 0 || b.unacked() != 0 || !q.Drained() {
			t.Fatalf("received %v before io.EOF, want %v; unacked %d and %d", names, want, a.unacked(), b.unacked())
		}
	})
}

// roundTripFunc is a RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
