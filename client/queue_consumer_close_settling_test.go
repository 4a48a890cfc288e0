package client

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestQueueConsumer_CloseDoesNotNackWhatIsBeingAcked: Close while an ack
// of a received record is in flight: the record is the ack's, and Close
// does not give it back as well (a nack landing before the ack frees the
// record for another consumer, its work done twice).
func TestQueueConsumer_CloseDoesNotNackWhatIsBeingAcked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a")
		ackSent := make(chan struct{})
		release := make(chan struct{})
		var nacks atomic.Int32
		transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			switch {
			case strings.HasSuffix(r.URL.Path, "/acks"):
				close(ackSent)
				<-release
			case strings.HasSuffix(r.URL.Path, "/nacks"):
				nacks.Add(1)
			}
			return n.RoundTrip(r)
		})
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Wait: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		msgs := receiveN(t, q, 1)
		acked := make(chan error)
		go func() { acked <- q.Ack(ctx, msgs...) }()
		<-ackSent
		if err := q.Close(ctx); err != nil {
			t.Fatal(err)
		}
		close(release)
		if err := <-acked; err != nil {
			t.Fatal(err)
		}
		if got := nacks.Load(); got != 0 {
			t.Fatalf("Close sent %d nacks for a record whose ack was in flight", got)
		}
	})
}
