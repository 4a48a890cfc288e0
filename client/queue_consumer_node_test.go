package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
)

// TestQueueConsumerE2E_AtLeastOnceOverManyPartitions: on a node, two
// queue consumers of a topic of 24 partitions share its 960 records:
// each record is acked, and every delivery of a record after its first
// follows a nack of it (each worker nacks a record it is the first to
// see, one in seven): no record is lost, and none is leased to two
// consumers at once. Then no partition has a record leased or not acked.
func TestQueueConsumerE2E_AtLeastOnceOverManyPartitions(t *testing.T) {
	n := testNode(t)
	c := n.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a record never delivered fails the test, never hangs it
	defer cancel()
	const partitions, per = 24, 40
	e2etest.ProduceNumbered(t, ctx, c, "jobs", partitions, per)

	type rec struct{ p, o int }
	var (
		mu         sync.Mutex
		deliveries = map[rec]int{}
		nacks      = map[rec]int{}
		acked      = map[rec]bool{}
		inWork     = map[rec]bool{}
		problems   []string
	)
	done := make(chan struct{})
	work := func(q *client.QueueConsumer) error {
		for {
			msgs, err := q.Receive(ctx)
			if err != nil {
				return err
			}
			var ack, nack []*client.Message
			mu.Lock()
			for _, m := range msgs {
				r := rec{m.Partition, int(m.Offset)}
				if inWork[r] {
					problems = append(problems, fmt.Sprintf("%v delivered while in work", r))
				}
				if want := fmt.Sprintf("%d/%d", r.p, r.o); string(m.Value) != want {
					problems = append(problems, fmt.Sprintf("%v holds %q", r, m.Value))
				}
				deliveries[r]++
				inWork[r] = true
				if deliveries[r] == 1 && r.o%7 == 0 {
					nack = append(nack, m)
					nacks[r]++
					inWork[r] = false // given back by the nack below: another may get it from then on
				} else {
					ack = append(ack, m)
				}
			}
			mu.Unlock()
			// Acked before the work is marked done: a delivery before that
			// is a second live lease.
			if err := q.Nack(ctx, nack...); err != nil {
				return err
			}
			if err := q.Ack(ctx, ack...); err != nil {
				return err
			}
			mu.Lock()
			for _, m := range ack {
				inWork[rec{m.Partition, int(m.Offset)}] = false
				acked[rec{m.Partition, int(m.Offset)}] = true
			}
			if len(acked) == partitions*per {
				select {
				case <-done:
				default:
					close(done)
				}
			}
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	var qs []*client.QueueConsumer
	for range 2 {
		q, err := c.NewQueueConsumer(ctx, "jobs", client.QueueConsumerOptions{MaxRecords: 17, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
		wg.Go(func() {
			if err := work(q); !errors.Is(err, client.ErrQueueConsumerClosed) {
				errs <- err
			}
		})
	}
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatalf("%d of %d records acked before the test's deadline", len(acked), partitions*per)
	}
	for _, q := range qs {
		if err := q.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	for r, d := range deliveries {
		if d != 1+nacks[r] {
			t.Fatalf("%v delivered %d times, nacked %d: a lease ran out or two were live", r, d, nacks[r])
		}
	}
	for p := range partitions {
		st, err := c.Consumer(ctx, "jobs", p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Lag != 0 || st.Leased != 0 || st.Frontier != per {
			t.Fatalf("partition %d after the consumers: %+v; want every record acked, none leased", p, st)
		}
	}
}
