package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// receiveN receives until it holds n messages.
func receiveN(t *testing.T, q *QueueConsumer, n int) []*Message {
	t.Helper()
	var out []*Message
	for len(out) < n {
		msgs, err := q.Receive(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msgs...)
	}
	if len(out) != n {
		t.Fatalf("received %d messages, want %d", len(out), n)
	}
	return out
}

func names(msgs []*Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, fmt.Sprintf("%d/%d=%s", m.Partition, m.Offset, m.Value))
	}
	slices.Sort(out)
	return out
}

// TestQueueConsumer_RenewalKeepsASlowRecord: records held in work five
// times longer than their lease are renewed by the consumer alone, one
// extension per partition and lease each time a third of the lease is
// left: none runs out, none is delivered again, and the acks settle
// them.
func TestQueueConsumer_RenewalKeepsASlowRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 2)
		n.append(0, "a")
		n.append(1, "b")
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		msgs := receiveN(t, q, 2)
		time.Sleep(15 * time.Second) // slow work, on the bubble's clock
		for _, m := range msgs {
			if m.LeaseLost() {
				t.Fatalf("%d/%d lost its lease while in work", m.Partition, m.Offset)
			}
		}
		if err := q.Ack(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		_, extends, expired := n.counts()
		if again := n.redelivered(); len(again) != 0 || expired != 0 {
			t.Fatalf("delivered again %v, %d leases ran out; want none", again, expired)
		}
		// Renewed at 2 s, then every 2 s (a third of 3 s left): 7 rounds
		// over 15 s, one extension per partition each.
		if extends != 14 {
			t.Fatalf("%d extensions in 15 s of two partitions' records under a 3 s lease; want 14", extends)
		}
		if n.unacked() != 0 {
			t.Fatalf("%d records not acked", n.unacked())
		}
	})
}

// TestQueueConsumer_MaxHoldBoundsRenewal: a record is renewed up to
// MaxHold after it was leased, and no more: then its lease runs out, it
// is delivered again, and the first delivery says its lease was lost.
func TestQueueConsumer_MaxHoldBoundsRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a")
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second, MaxHold: 6 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		first := receiveN(t, q, 1)[0]
		again := receiveN(t, q, 1)[0] // the bubble's clock runs on to the lease's end
		if again.Offset != 0 || again.LeaseID == first.LeaseID || !first.LeaseLost() || again.LeaseLost() {
			t.Fatalf("delivered again %+v (first %+v, lost %v); want offset 0 under a new lease, the first lost", again, first, first.LeaseLost())
		}
		// Leased at 0, renewed at 2 and 4 (deadline 7); 6 is MaxHold: no
		// more. Delivered again at 7.
		if _, extends, expired := n.counts(); extends != 2 || expired != 1 {
			t.Fatalf("%d extensions, %d leases ran out; want 2 and 1", extends, expired)
		}
		if err := again.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestQueueConsumer_FailedRenewalsLoseTheLease: extensions that fail
// are tried again on the retry schedule; a lease that reaches its end
// unrenewed is lost, and the record comes again.
func TestQueueConsumer_FailedRenewalsLoseTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a")
		n.failExtends = 1000
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		first := receiveN(t, q, 1)[0]
		again := receiveN(t, q, 1)[0]
		if !first.LeaseLost() || again.Offset != 0 {
			t.Fatalf("after failed renewals: first lost %v, again %+v", first.LeaseLost(), again)
		}
		if _, extends, _ := n.counts(); extends < 2 {
			t.Fatalf("%d extensions tried; want a retry after the first failed", extends)
		}
	})
}

// TestQueueConsumer_NackRedelivers: a nacked record comes again at once
// (no lease ran out), under a new lease; a nack of a settled message is
// nothing to do.
func TestQueueConsumer_NackRedelivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 3)
		for p := range 3 {
			n.append(p, fmt.Sprintf("v%d", p))
		}
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		msgs := receiveN(t, q, 3)
		start := time.Now()
		if err := q.Nack(ctx, msgs[1]); err != nil {
			t.Fatal(err)
		}
		again := receiveN(t, q, 1)[0]
		if again.Partition != msgs[1].Partition || again.Offset != msgs[1].Offset || again.LeaseID == msgs[1].LeaseID || string(again.Value) != string(msgs[1].Value) {
			t.Fatalf("after a nack of %+v: %+v", msgs[1], again)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the nacked record came after %v; want at once", waited)
		}
		if err := q.Ack(ctx, msgs[0], msgs[2], again); err != nil {
			t.Fatal(err)
		}
		if err := msgs[1].Nack(ctx); err != nil {
			t.Fatalf("a nack of a message settled: %v", err)
		}
		if _, _, expired := n.counts(); expired != 0 || n.unacked() != 0 {
			t.Fatalf("%d leases ran out, %d records not acked; want none", expired, n.unacked())
		}
	})
}

// TestQueueConsumer_CloseGivesBackWhatIsNotSettled: Close nacks every
// record in work, those Receive returned and those it had not yet: a
// consumer after it gets them at once; what was acked stays settled;
// Receive, Ack and Nack after Close say it is closed.
func TestQueueConsumer_CloseGivesBackWhatIsNotSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 2)
		n.append(0, "a", "b", "c")
		n.append(1, "d", "e")
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{MaxRecords: 2})
		if err != nil {
			t.Fatal(err)
		}
		msgs := receiveN(t, q, 2)
		synctest.Wait() // the other three are leased, not received
		if err := q.Ack(ctx, msgs[0]); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := q.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Receive(ctx); !errors.Is(err, ErrQueueConsumerClosed) {
			t.Fatalf("Receive after Close: %v", err)
		}
		if err := msgs[1].Ack(ctx); !errors.Is(err, ErrQueueConsumerClosed) {
			t.Fatalf("Ack after Close: %v", err)
		}
		if err := q.Close(ctx); err != nil {
			t.Fatalf("a second Close: %v", err)
		}

		q2, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer q2.Close(ctx)
		rest := receiveN(t, q2, 4)
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the records given back came after %v; want at once", waited)
		}
		want := []string{"0/0=a", "0/1=b", "0/2=c", "1/0=d", "1/1=e"}
		want = slices.DeleteFunc(want, func(s string) bool {
			return s == fmt.Sprintf("%d/%d=%s", msgs[0].Partition, msgs[0].Offset, msgs[0].Value)
		})
		if got := names(rest); !slices.Equal(got, want) {
			t.Fatalf("after Close: %v, want %v", got, want)
		}
		if _, _, expired := n.counts(); expired != 0 {
			t.Fatalf("%d leases ran out; Close gave them back", expired)
		}
	})
}

// TestQueueConsumer_MaxInWorkBoundsTheLeases: with MaxInWork records in
// work no consume is sent; an ack makes room for as many more.
func TestQueueConsumer_MaxInWorkBoundsTheLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 2)
		n.append(0, "a", "b", "c")
		n.append(1, "d", "e")
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{MaxInWork: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		msgs := receiveN(t, q, 2)
		synctest.Wait()
		before, _, _ := n.counts()
		time.Sleep(time.Minute)
		if after, _, _ := n.counts(); after != before {
			t.Fatalf("%d consumes sent with MaxInWork records in work", after-before)
		}
		if err := q.Ack(ctx, msgs[0]); err != nil {
			t.Fatal(err)
		}
		more := receiveN(t, q, 1)
		synctest.Wait()
		if got, _ := q.Receive(canceled()); len(got) != 0 {
			t.Fatalf("%d more records with MaxInWork in work", len(got))
		}
		if err := q.Ack(ctx, append(msgs[1:], more...)...); err != nil {
			t.Fatal(err)
		}
	})
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestQueueConsumer_CoversEveryOwnerWithinMaxInWork: over two nodes,
// each owning a partition of the topic, the consumer sends a consume to
// each (the node it was made with, and the owner the description names)
// and acks each record on its owner; the two consumes in flight at once
// never lease more than MaxInWork between them.
func TestQueueConsumer_CoversEveryOwnerWithinMaxInWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newQueueNode("jobs", 2), newQueueNode("jobs", 2)
		a.elsewhere[1] = "http://10.0.0.2:7480"
		b.elsewhere[0] = "http://127.0.0.1:7480"
		a.append(0, "a0", "a1", "a2", "a3", "a4")
		b.append(1, "b0", "b1", "b2", "b3", "b4")
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: queueCluster{"127.0.0.1:7480": a, "10.0.0.2:7480": b}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{MaxInWork: 4, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		var got []*Message
		deadline, cancel := context.WithTimeout(ctx, time.Hour) // on the bubble's clock: a record never leased fails the test at once
		defer cancel()
		for len(got) < 10 {
			msgs, err := q.Receive(deadline)
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if held := a.leased() + b.leased(); held > 4 {
				t.Fatalf("%d records leased at once on the two nodes; MaxInWork is 4", held)
			}
			if err := q.Ack(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
			got = append(got, msgs...)
		}
		want := []string{"0/0=a0", "0/1=a1", "0/2=a2", "0/3=a3", "0/4=a4", "1/0=b0", "1/1=b1", "1/2=b2", "1/3=b3", "1/4=b4"}
		if names := names(got); !slices.Equal(names, want) {
			t.Fatalf("received %v, want %v", names, want)
		}
		if a.unacked() != 0 || b.unacked() != 0 {
			t.Fatalf("not acked: %d on the first node, %d on the second", a.unacked(), b.unacked())
		}
	})
}

// fiveOwners is a cluster of five nodes, the client's own first, each
// owning one partition of a topic of five: partition i is the i-th's.
func fiveOwners() ([]*queueNode, queueCluster) {
	var nodes []*queueNode
	cluster := queueCluster{}
	for i := range 5 {
		nodes = append(nodes, newQueueNode("jobs", 5))
		cluster[fmt.Sprintf("10.0.0.%d:7480", i+1)] = nodes[i]
	}
	cluster["127.0.0.1:7480"] = nodes[0]
	for i, n := range nodes {
		for p := range 5 {
			switch {
			case p == i:
			case p == 0:
				n.elsewhere[p] = "http://127.0.0.1:7480"
			default:
				n.elsewhere[p] = fmt.Sprintf("http://10.0.0.%d:7480", p+1)
			}
		}
	}
	return nodes, cluster
}

// TestQueueConsumer_AnIdleOwnerLeavesRoomToTheBusyOne: with MaxInWork
// no more than MaxRecords, over five owners of which four have nothing,
// an idle owner's long poll reserves its share of MaxInWork only: the
// busy owner's records are leased at once, not after the idle polls end.
func TestQueueConsumer_AnIdleOwnerLeavesRoomToTheBusyOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes, cluster := fiveOwners()
		nodes[4].append(4, "b0", "b1", "b2", "b3", "b4", "b5")
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: cluster}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		start := time.Now()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{MaxRecords: 1000}) // consume --queue --follow's options
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		if err := q.Ack(ctx, receiveN(t, q, 6)...); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("6 records ready on one owner took %v of the bubble's clock to receive, four other owners idle", took)
		}
	})
}

// TestQueueConsumer_AMovedPartitionIsLeasedFromItsNewOwner: when both
// partitions move from the node the client was made with to another, a
// record appended on the new owner is leased within the owners' reread,
// and the loop of the old owner, which owns nothing now, ends: no more
// consumes are sent to it.
func TestQueueConsumer_AMovedPartitionIsLeasedFromItsNewOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newQueueNode("jobs", 2), newQueueNode("jobs", 2)
		b.elsewhere[0], b.elsewhere[1] = "http://127.0.0.1:7480", "http://127.0.0.1:7480"
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: queueCluster{"127.0.0.1:7480": a, "10.0.0.2:7480": b}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		synctest.Wait()
		a.mu.Lock()
		a.elsewhere[0], a.elsewhere[1] = "http://10.0.0.2:7480", "http://10.0.0.2:7480"
		a.mu.Unlock()
		b.mu.Lock()
		clear(b.elsewhere)
		b.mu.Unlock()
		moved := time.Now()
		b.append(1, "b0")
		m := receiveN(t, q, 1)[0]
		if took := time.Since(moved); took > ownersEvery {
			t.Errorf("the moved partition's record came %v after the move; want within the reread", took)
		}
		if err := m.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		before, _, _ := a.counts()
		time.Sleep(time.Minute)
		if after, _, _ := a.counts(); after != before {
			t.Errorf("%d consumes to a node that owns nothing of the topic", after-before)
		}
	})
}

// TestQueueConsumer_ARecordLeasedAgainIsReceivedOnce: a record the node
// leases again (its lease given up there) before Receive returned its
// first delivery is received once, under its new lease: the first
// delivery, lost, is not handed out.
func TestQueueConsumer_ARecordLeasedAgainIsReceivedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a")
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		synctest.Wait() // leased, not received
		n.mu.Lock()
		n.parts[0][0].given = true // as a nack by another would
		n.wake()
		n.mu.Unlock()
		synctest.Wait() // leased again
		got, err := q.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].LeaseLost() || got[0].LeaseID != 102 {
			t.Fatalf("received %v (first lost %v, lease %d); want 0/0 once, under its second lease 102", names(got), got[0].LeaseLost(), got[0].LeaseID)
		}
		if err := q.Ack(ctx, got...); err != nil {
			t.Fatal(err)
		}
	})
}

// TestQueueConsumer_ALostRecordFreesItsRoom: with MaxInWork 1, a record
// whose lease is lost (its renewals failed to its end), not acked, holds
// no room: the consumer leases again.
func TestQueueConsumer_ALostRecordFreesItsRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a", "b")
		n.failExtends = 1000
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second, MaxInWork: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		first := receiveN(t, q, 1)[0]
		deadline, cancel := context.WithTimeout(ctx, time.Hour) // on the bubble's clock: no more leased fails the test at once
		defer cancel()
		next, err := q.Receive(deadline)
		if err != nil {
			t.Fatalf("after %d/%d's lease was lost (%v), not acked: %v", first.Partition, first.Offset, first.LeaseLost(), err)
		}
		if !first.LeaseLost() {
			t.Fatalf("received %v with %d/%d in work and not lost; MaxInWork is 1", names(next), first.Partition, first.Offset)
		}
	})
}

// TestQueueConsumer_AcksOneAtATimeBatchTheConsumes: a caller that acks
// each record alone, with records still ready, does not make the
// consumer send a consume an ack: it waits for room for half a consume
// (MaxRecords 10: 5), so 100 records take about 20 consumes, not 100.
func TestQueueConsumer_AcksOneAtATimeBatchTheConsumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		for range 100 {
			n.append(0, "v")
		}
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{MaxRecords: 10, MaxInWork: 20, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		acked := 0
		for acked < 100 {
			msgs, err := q.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if err := m.Ack(ctx); err != nil {
					t.Fatal(err)
				}
				acked++
				synctest.Wait() // the consume an ack may send is sent
			}
		}
		if consumes, _, _ := n.counts(); consumes > 100/5+2 {
			t.Fatalf("%d consumes to lease 100 records acked one at a time; want one per 5 acks or so (22 at most)", consumes)
		}
		if n.unacked() != 0 {
			t.Fatalf("%d records not acked", n.unacked())
		}
	})
}

// TestQueueConsumer_MaxInWorkBelowTheOwnersServesTheBusyOne: with
// MaxInWork below the number of owners, an idle owner back from an empty
// long poll does not take the room again before the busy owner that
// waited for it, and its turn while the busy one waits is a poll of
// 1 ms: the busy owner's 6 records come within 10 s (an idle long poll),
// not one idle poll a record, nor poll after poll for hours.
func TestQueueConsumer_MaxInWorkBelowTheOwnersServesTheBusyOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newQueueNode("jobs", 2), newQueueNode("jobs", 2)
		a.elsewhere[1] = "http://10.0.0.2:7480"
		b.elsewhere[0] = "http://127.0.0.1:7480"
		b.append(1, "b0", "b1", "b2", "b3", "b4", "b5")
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: queueCluster{"127.0.0.1:7480": a, "10.0.0.2:7480": b}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		start := time.Now()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{MaxInWork: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		for range 6 {
			if err := q.Ack(ctx, receiveN(t, q, 1)...); err != nil {
				t.Fatal(err)
			}
		}
		consA, _, _ := a.counts()
		if took := time.Since(start); took > 10*time.Second || consA > 6 {
			t.Errorf("6 records ready on one owner, MaxInWork 1, took %v of the bubble's clock and %d consumes to the idle owner; want 10 s at most, an idle poll a record at most", took, consA)
		}
	})
}
