package client

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/api"
)

// faultTransport wraps a fake node: extensions to hang never answer until
// cancelled; a request already cancelled is counted and takes 100 ms of the
// bubble's clock to fail (else a spinning loop freezes the bubble); acks are
// applied at once and answered after ackDelay.
type faultTransport struct {
	next        http.RoundTripper
	hang        func(*http.Request) bool
	ackDelay    time.Duration
	afterCancel atomic.Int64
	answer      func(*http.Request) *http.Response // if it returns one, the request's answer
}

func (tr *faultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		tr.afterCancel.Add(1)
		time.Sleep(100 * time.Millisecond)
		return nil, err
	}
	if tr.answer != nil {
		if resp := tr.answer(r); resp != nil {
			return resp, nil
		}
	}
	if tr.hang != nil && tr.hang(r) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	resp, err := tr.next.RoundTrip(r)
	if strings.HasSuffix(r.URL.Path, "/acks") && tr.ackDelay > 0 {
		time.Sleep(tr.ackDelay)
	}
	return resp, err
}

func isExtend(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/extend") }

// TestQueueConsumer_CloseDuringAHungRenewalGivesBackAtOnce: Close while
// an extension hangs ends it, sends nothing more and nacks the record at
// once: another consumer gets it with no lease run out.
func TestQueueConsumer_CloseDuringAHungRenewalGivesBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a")
		tr := &faultTransport{next: n, hang: isExtend}
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		receiveN(t, q, 1)
		time.Sleep(2500 * time.Millisecond) // the renewal sent at 2 s hangs
		synctest.Wait()
		start := time.Now()
		if err := q.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if took, sent := time.Since(start), tr.afterCancel.Load(); took != 0 || sent != 0 {
			t.Errorf("Close took %v of the bubble's clock and the renewer sent %d extensions after it; want at once, none", took, sent)
		}
		q2, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer q2.Close(ctx)
		again := receiveN(t, q2, 1)[0]
		if _, _, expired := n.counts(); expired != 0 || time.Since(start) != 0 {
			t.Errorf("%d/%d came again %v after Close, its lease run out (%d expired); want given back by Close at once",
				again.Partition, again.Offset, time.Since(start), expired)
		}
	})
}

// TestQueueConsumer_ALongPollLongerThanTheLeaseKeepsItsRecords: with a
// Wait longer than the lease, a record leased late in a long poll is
// still renewed before its lease ends: each consume waits a third of the
// lease at most.
func TestQueueConsumer_ALongPollLongerThanTheLeaseKeepsItsRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		time.Sleep(5 * time.Second) // into the first long poll
		n.append(0, "a")
		m := receiveN(t, q, 1)[0]
		time.Sleep(10 * time.Second) // slow work
		_, extends, expired := n.counts()
		if m.LeaseLost() || expired != 0 || len(n.redelivered()) != 0 {
			t.Errorf("a record held 10 s under a 3 s lease it was to renew: lost %v, %d extensions, %d leases ran out, delivered again %v",
				m.LeaseLost(), extends, expired, n.redelivered())
		}
		if err := m.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestQueueConsumer_AHungNodeDoesNotStallOtherRenewals: over two
// nodes, one of which never answers an extension, the records of the
// other are still renewed, and the hung node's record is lost once its
// lease ends: each extension is given up at the earliest end of the
// leases it names, and none waits for another.
func TestQueueConsumer_AHungNodeDoesNotStallOtherRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newQueueNode("jobs", 2), newQueueNode("jobs", 2)
		a.elsewhere[1] = "http://10.0.0.2:7480"
		b.elsewhere[0] = "http://127.0.0.1:7480"
		a.append(0, "a0")
		b.append(1, "b0")
		tr := &faultTransport{next: queueCluster{"127.0.0.1:7480": a, "10.0.0.2:7480": b},
			hang: func(r *http.Request) bool { return r.URL.Host == "10.0.0.2:7480" && isExtend(r) }}
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second, MaxInWork: 2}) // no consume leases 1/0 again while it is in work
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		msgs := receiveN(t, q, 2)
		time.Sleep(10 * time.Second) // slow work
		for _, m := range msgs {
			if m.Partition == 0 && (m.LeaseLost() || len(a.redelivered()) != 0) {
				t.Errorf("0/0, on a healthy node, lost its lease while another node hung: lost %v, delivered again %v", m.LeaseLost(), a.redelivered())
			}
			if m.Partition == 1 && !m.LeaseLost() {
				t.Errorf("1/0, whose renewal hung, is not lost 10 s after it was leased for 3 s: its extension was not given up at its lease's end")
			}
		}
	})
}

// TestQueueConsumer_AHungConsumeIsGivenUp: a consume its node never
// answers is given up some time after its Wait, and sent again: a
// record appended meanwhile is leased.
func TestQueueConsumer_AHungConsumeIsGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		var consumes atomic.Int64
		tr := &faultTransport{next: n, hang: func(r *http.Request) bool {
			return strings.HasSuffix(r.URL.Path, "/consume") && consumes.Add(1) == 1
		}}
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		n.append(0, "a")
		deadline, cancel := context.WithTimeout(ctx, time.Hour) // on the bubble's clock: a consume never given up fails the test at once
		defer cancel()
		msgs, err := q.Receive(deadline)
		if err != nil {
			t.Fatalf("a record appended while the first consume hung: %v", err)
		}
		if err := q.Ack(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	})
}

// TestQueueConsumer_AnAckInFlightKeepsTheRenewalWhole: an ack applied
// by the node but not yet answered when its lease's renewal is due does
// not make the extension short: the record being acked is left out, and
// the 99 others are renewed by one extension.
func TestQueueConsumer_AnAckInFlightKeepsTheRenewalWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		for range 100 {
			n.append(0, "v")
		}
		tr := &faultTransport{next: n, ackDelay: 200 * time.Millisecond}
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		msgs := receiveN(t, q, 100)
		time.Sleep(1900 * time.Millisecond)
		if err := q.Ack(ctx, msgs[0]); err != nil { // applied at 1.9 s, answered at 2.1 s; renewal due at 2 s
			t.Fatal(err)
		}
		synctest.Wait()
		if _, extends, _ := n.counts(); extends > 3 {
			t.Errorf("%d extensions to renew 99 records of one lease once; want a few", extends)
		}
	})
}

// TestQueueConsumer_AShortRenewalIsSplitInHalves: an extension of 100
// records of one lease that counts 99 (the node let one go) is split in
// halves, and the half that is short again, until the record whose
// lease ended is found alone: it is lost, the 99 others are not, in a
// few extensions rather than one a record.
func TestQueueConsumer_AShortRenewalIsSplitInHalves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		for range 100 {
			n.append(0, "v")
		}
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second, MaxInWork: 100}) // no consume leases 0/37 again
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		msgs := receiveN(t, q, 100)
		n.mu.Lock()
		n.parts[0][37].given = true // as a nack by another would: its lease ended
		n.mu.Unlock()
		time.Sleep(2500 * time.Millisecond) // the renewal at 2 s, and its halves
		synctest.Wait()
		for _, m := range msgs {
			if lost := m.LeaseLost(); lost != (m.Offset == 37) {
				t.Errorf("0/%d: lost %v", m.Offset, lost)
			}
		}
		// One short, then two halves a level down to one record: 7 levels
		// (100 -> 50 -> 25 -> 13 -> 7 -> 4 -> 2 -> 1).
		if _, extends, _ := n.counts(); extends > 1+2*7 {
			t.Errorf("%d extensions to find the one record of 100 whose lease ended; want 15 at most", extends)
		}
	})
}

// TestQueueConsumer_AnAckRefusedLeavesItsRecordsRenewed: an ack naming
// a message of another consumer is refused whole, and the messages of
// its own it named are renewed as before.
func TestQueueConsumer_AnAckRefusedLeavesItsRecordsRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 2)
		n.append(0, "a")
		n.append(1, "b")
		ctx := context.Background()
		opts := QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second, MaxInWork: 1}
		q, err := n.client().NewQueueConsumer(ctx, "jobs", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		other, err := n.client().NewQueueConsumer(ctx, "jobs", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close(ctx)
		mine, theirs := receiveN(t, q, 1)[0], receiveN(t, other, 1)[0]
		if err := q.Ack(ctx, mine, theirs); err == nil {
			t.Fatal("an ack naming another consumer's message succeeded")
		}
		time.Sleep(10 * time.Second)
		if mine.LeaseLost() || len(n.redelivered()) != 0 {
			t.Fatalf("after a refused ack: lost %v, delivered again %v; want renewed", mine.LeaseLost(), n.redelivered())
		}
		if err := q.Ack(ctx, mine); err != nil {
			t.Fatal(err)
		}
	})
}

// TestQueueConsumer_ARenewalOfATopicOrPartitionGoneLosesAtOnce: an extension the
// node answers 404 topic_not_found, or partition_not_found, marks its
// records lost at once, not after retries up to their lease's end.
func TestQueueConsumer_ARenewalOfATopicOrPartitionGoneLosesAtOnce(t *testing.T) {
	for _, code := range []string{api.CodeTopicNotFound, api.CodePartitionNotFound} {
		t.Run(code, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newQueueNode("jobs", 1)
				n.append(0, "a")
				var extends atomic.Int64
				tr := &faultTransport{next: n, answer: func(r *http.Request) *http.Response {
					if !isExtend(r) {
						return nil
					}
					extends.Add(1)
					return errorAnswer(404, code, nil)
				}}
				c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: tr}})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second, MaxInWork: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close(ctx)
				m := receiveN(t, q, 1)[0]
				time.Sleep(2100 * time.Millisecond) // the renewal at 2 s
				synctest.Wait()
				if !m.LeaseLost() || extends.Load() != 1 {
					t.Fatalf("after a renewal answered %s: lost %v, %d extensions; want lost after one", code, m.LeaseLost(), extends.Load())
				}
			})
		})
	}
}

// TestQueueConsumer_ARecordBeingAckedIsStillRenewed: an ack in flight
// longer than the lease left does not stop the record's renewal: no
// other consumer leases it meanwhile, and its lease is not lost.
func TestQueueConsumer_ARecordBeingAckedIsStillRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a")
		tr := &faultTransport{next: n, hang: func(r *http.Request) bool { return len(r.URL.Path) > 5 && r.URL.Path[len(r.URL.Path)-5:] == "/acks" }}
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second, MaxInWork: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		m := receiveN(t, q, 1)[0]
		start := time.Now()
		done := make(chan error)
		go func() {
			actx, cancel := context.WithTimeout(ctx, 20*time.Second) // an ack retried through a move, say
			defer cancel()
			done <- m.Ack(actx)
		}()
		q2, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		again, _ := q2.Receive(rctx)
		rcancel()
		_, extends, expired := n.counts()
		if len(again) != 0 || m.LeaseLost() {
			t.Errorf("while its ack was in flight under a 3 s lease: another consumer leased %v after %v (%d extensions, %d ran out), the first's LeaseLost %v",
				names(again), time.Since(start), extends, expired, m.LeaseLost())
		}
		q2.Close(ctx)
		<-done
	})
}

// TestQueueConsumer_AHungNodeWithManyPartitionsLeavesSlotsToOthers: a
// hung node with three times renewSlots partitions, whose extensions
// hang, does not hold the slots of a healthy node's renewal due at the
// same time (its 25 extensions start in no set order: the healthy one
// would come after renewSlots hung ones in most runs).
func TestQueueConsumer_AHungNodeWithManyPartitionsLeavesSlotsToOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hung = 3 * renewSlots
		a, b := newQueueNode("jobs", 1+hung), newQueueNode("jobs", 1+hung)
		for p := 1; p <= hung; p++ {
			a.elsewhere[p] = "http://10.0.0.2:7480"
			b.append(p, "b")
		}
		b.elsewhere[0] = "http://127.0.0.1:7480"
		a.append(0, "a0")
		tr := &faultTransport{next: queueCluster{"127.0.0.1:7480": a, "10.0.0.2:7480": b},
			hang: func(r *http.Request) bool { return r.URL.Host == "10.0.0.2:7480" && isExtend(r) }}
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		msgs := receiveN(t, q, 1+hung)
		time.Sleep(10 * time.Second)
		for _, m := range msgs {
			if m.Partition == 0 && (m.LeaseLost() || len(a.redelivered()) != 0) {
				t.Errorf("0/0, on a healthy node, lost its lease while another node hung: lost %v, delivered again %v", m.LeaseLost(), a.redelivered())
			}
		}
	})
}
