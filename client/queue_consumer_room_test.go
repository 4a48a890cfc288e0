package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func consumesOf(nodes []*queueNode) (out []int) {
	for _, n := range nodes {
		c, _, _ := n.counts()
		out = append(out, c)
	}
	return out
}

// All five owners idle, for a minute: no 1 ms polling.
func TestQueueConsumer_IdleOwnersDoNotPollFast(t *testing.T) {
	for _, miw := range []int{1, 3, 0} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				nodes, cluster := fiveOwners()
				c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: cluster}})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{MaxInWork: miw})
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close(ctx)
				time.Sleep(time.Minute)
				synctest.Wait()
				got := consumesOf(nodes)
				t.Logf("MaxInWork %d, all idle, 60 s: consumes per node %v", miw, got)
				for _, n := range got {
					if n > 8 {
						t.Errorf("MaxInWork %d: %v consumes in 60 s of 10 s polls", miw, got)
					}
				}
			})
		})
	}
}

// One owner leased a record that stays in work (never acked), four idle.
func TestQueueConsumer_ARecordHeldCostsIdleOwnersNoFastPolls(t *testing.T) {
	for _, miw := range []int{1, 2, 3} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				nodes, cluster := fiveOwners()
				nodes[4].append(4, "b0")
				c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: cluster}})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{MaxInWork: miw})
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close(ctx)
				receiveN(t, q, 1)
				time.Sleep(time.Minute)
				synctest.Wait()
				got := consumesOf(nodes)
				t.Logf("MaxInWork %d, one record held, 60 s: consumes per node %v", miw, got)
				for _, n := range got {
					if n > 10 {
						t.Errorf("MaxInWork %d: %v consumes in 60 s", miw, got)
					}
				}
			})
		})
	}
}

// Receive emptying ready must let a loop that waited for the floor go on.
func TestQueueConsumer_ReceiveEmptyingReadyWakesTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a", "b", "c", "d", "e", "f", "g", "h")
		ctx := context.Background()
		q, err := n.client().NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{MaxInWork: 10, MaxRecords: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		got := receiveN(t, q, 8) // room 2 < floor 5 while they were ready
		n.append(0, "i", "j")
		rctx, cancel := context.WithTimeout(ctx, ownersEvery/2) // sooner than the owners' reread, which wakes the loops too
		defer cancel()
		more, err := q.Receive(rctx)
		if err != nil {
			t.Errorf("8 of MaxInWork 10 received, none ready, 2 more on the node: Receive %v (%d consumes)", err, func() int { c, _, _ := n.counts(); return c }())
		}
		_ = append(got, more...)
	})
}

// Two records of one lease being acked apart: a's ack landed but its
// answer is slow, b's has not landed. Their extension counts b only:
// b's lease is renewed on the node, and must not be taken as lost.
func TestQueueConsumer_ASettlingGroupWithALandedAckKeepsTheOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newQueueNode("jobs", 1)
		n.append(0, "a", "b")
		tr := &faultTransport{next: n, ackDelay: 20 * time.Second, answer: func(r *http.Request) *http.Response {
			if !strings.HasSuffix(r.URL.Path, "/acks") {
				return nil
			}
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if strings.Contains(string(body), "[1]") {
				<-r.Context().Done()
				return errorAnswer(503, "unavailable", nil)
			}
			return nil
		}}
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		q, err := c.NewQueueConsumer(ctx, "jobs", QueueConsumerOptions{Lease: 3 * time.Second, Wait: time.Second, MaxInWork: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close(ctx)
		msgs := receiveN(t, q, 2)
		var wg sync.WaitGroup
		for _, m := range msgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				actx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				m.Ack(actx)
			}()
		}
		time.Sleep(6 * time.Second)
		_, extends, _ := n.counts()
		if msgs[1].LeaseLost() {
			t.Errorf("b, its ack in flight and its lease renewed on the node (%d extensions, live %v), is LeaseLost at 6 s", extends, n.leased())
		}
		wg.Wait()
	})
}

// As AHungNodeWithManyPartitionsLeavesSlotsToOthers, but the healthy
// node's record is leased 500 ms after the hung node's: every hung
// extension has asked for a slot before it, in every run.
func TestQueueConsumer_AHungNodesExtensionsLeaveARenewalDueLaterItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hung = 3 * renewSlots
		a, b := newQueueNode("jobs", 1+hung), newQueueNode("jobs", 1+hung)
		for p := 1; p <= hung; p++ {
			a.elsewhere[p] = "http://10.0.0.2:7480"
			b.append(p, "b")
		}
		b.elsewhere[0] = "http://127.0.0.1:7480"
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
		receiveN(t, q, hung)
		time.Sleep(500 * time.Millisecond)
		a.append(0, "a0")
		m := receiveN(t, q, 1)[0]
		time.Sleep(10 * time.Second)
		if m.LeaseLost() || len(a.redelivered()) != 0 {
			t.Errorf("0/0, on a healthy node, lost its lease while another node hung: lost %v, delivered again %v", m.LeaseLost(), a.redelivered())
		}
	})
}
