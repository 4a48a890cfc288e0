package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// polled is one Poll's outcome.
type polled struct {
	b   Batch
	err error
}

// pollAsync runs one Poll in a goroutine of its own and returns the
// channel its outcome comes on.
func pollAsync(ctx context.Context, k *Consumer) <-chan polled {
	out := make(chan polled, 1)
	go func() {
		b, err := k.Poll(ctx)
		out <- polled{b, err}
	}()
	return out
}

// positions is "p@offset" of partitions from to to-1, at offset 0 but
// those in at.
func positions(from, to int, at map[int]int64) string {
	var out []string
	for p := from; p < to; p++ {
		out = append(out, fmt.Sprintf("%d@%d", p, at[p]))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// TestConsumer_IdlePartitionsShareOneWait: 100 partitions, 4 requests in
// flight: each partition is read once, then all of them are waited on
// by one topic-wide wait; a record committed to partition 97 then is read
// with one fetch, and the next wait names it at its new position. Never
// more than 4 requests at once.
func TestConsumer_IdlePartitionsShareOneWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const partitions, inFlight = 100, 4
		n := newTopicNode("orders", partitions)
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: inFlight})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		got := pollAsync(context.Background(), k)
		synctest.Wait()
		served := n.took()
		var reads []string
		for _, s := range served[:partitions] {
			reads = append(reads, s)
		}
		slices.Sort(reads)
		var want []string
		for p := range partitions {
			want = append(want, fmt.Sprintf("%d@0 0s", p))
		}
		slices.Sort(want)
		if len(served) != partitions+1 || !slices.Equal(reads, want) || served[partitions] != "wait "+positions(0, partitions, nil)+" 30s" {
			t.Fatalf("idle: served %d requests, %v ... %v; want each partition read once, then one wait naming all", len(served), served[:3], served[partitions:])
		}

		n.append(97, "x")
		r := <-got
		if r.err != nil || r.b.Partition != 97 || len(r.b.Records) != 1 || string(r.b.Records[0].Value) != "x" {
			t.Fatalf("a record to partition 97: %+v, %v", r.b, r.err)
		}
		got = pollAsync(context.Background(), k)
		synctest.Wait()
		if served := n.took(); fmt.Sprint(served) != "[97@0 0s wait "+positions(0, partitions, map[int]int64{97: 1})+" 30s]" {
			t.Fatalf("after a record to partition 97: served %v; want its fetch, then one wait naming it at 1", served)
		}
		if _, most := n.stats(); most > inFlight {
			t.Fatalf("%d requests in flight at once; MaxInFlight is %d", most, inFlight)
		}
		k.Close()
		if r := <-got; !errors.Is(r.err, ErrConsumerClosed) {
			t.Fatalf("a Poll waiting when Close came: %v", r.err)
		}
	})
}

// idleMinutes polls k (idle) for d of the bubble's clock and returns the
// requests n served meanwhile: fetches and waits.
func idleMinutes(t *testing.T, n *topicNode, k *Consumer, d time.Duration) (fetches, waits int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := pollAsync(ctx, k)
	synctest.Wait() // each partition read, the idle ones waited on
	cancel()
	if r := <-got; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("idle: %+v, %v", r.b, r.err)
	}
	f0, w0 := n.requests()
	ctx, cancel = context.WithTimeout(context.Background(), d)
	defer cancel()
	if b, err := k.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle: %+v, %v", b, err)
	}
	f1, w1 := n.requests()
	return f1 - f0, w1 - w0
}

// TestConsumer_IdleRequestsAMinute: 1,000 idle partitions and the
// default 16 requests in flight cost one wait per Wait (30 s: 2 a
// minute), no fetch; on a node without the wait they take turns, about
// 16 x 4 fetches a second. Both counts are over the bubble's clock.
func TestConsumer_IdleRequestsAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const partitions = 1000
		for _, noWait := range []bool{false, true} {
			n := newTopicNode("orders", partitions)
			n.noWait = noWait
			k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true})
			if err != nil {
				t.Fatal(err)
			}
			// 10 minutes and 15 s: the waits end at 30 s, 60 s, ... 600 s.
			fetches, waits := idleMinutes(t, n, k, 10*time.Minute+15*time.Second)
			k.Close()
			perMinute := float64(fetches+waits) / 10.25
			t.Logf("1,000 idle partitions, MaxInFlight 16, node without the wait %v: %d fetches, %d waits in 10 min 15 s: %.0f requests a minute", noWait, fetches, waits, perMinute)
			switch {
			case !noWait && (fetches != 0 || waits != 20):
				t.Fatalf("idle 10 min 15 s: %d fetches, %d waits; want none and 20 (one per 30 s)", fetches, waits)
			case noWait && (waits != 0 || fetches > 16*int(10*time.Minute/rotatingWait)+16*int(15*time.Second/rotatingWait)+16):
				t.Fatalf("idle 10 min 15 s without the wait: %d fetches, %d waits; want turns of %v, 16 at a time", fetches, waits, rotatingWait)
			}
		}
	})
}

// plain404 is a node older than the topic-wide wait whose router answers
// an unknown route with a plain 404 (no API error body).
type plain404 struct{ *topicNode }

func (p plain404) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/wait") {
		return answer(404, "404 page not found\n"), nil
	}
	return p.topicNode.RoundTrip(r)
}

// consumerGoroutines counts the goroutines running a Consumer's code:
// its requests' and a Poll's.
func consumerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "storage/client.(*Consumer)") {
			count++
		}
	}
	return count
}

// TestConsumer_ANodeWithoutTheWaitTakesTurns: a node that answers the
// wait 404 not_found (or a plain 404) is asked once; the idle partitions
// then take turns of rotatingWait, never more than MaxInFlight fetches
// (and goroutines) at once, and a record committed to any of them comes
// within one turn over the partitions.
func TestConsumer_ANodeWithoutTheWaitTakesTurns(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const partitions, inFlight = 40, 4
				n := newTopicNode("orders", partitions)
				var rt http.RoundTripper = n
				if plain {
					rt = plain404{n}
				} else {
					n.noWait = true
				}
				c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: rt}})
				if err != nil {
					t.Fatal(err)
				}
				k, err := c.NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: inFlight})
				if err != nil {
					t.Fatal(err)
				}
				defer k.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the bubble's clock: idle for 10 s
				defer cancel()
				got := pollAsync(ctx, k)
				synctest.Wait()
				if idle := consumerGoroutines(); idle > inFlight+1 {
					t.Fatalf("idle, %d goroutines of the consumer; want its %d fetches and the Poll", idle, inFlight)
				}
				if r := <-got; !errors.Is(r.err, context.DeadlineExceeded) {
					t.Fatalf("idle 10 s: %+v, %v", r.b, r.err)
				}
				synctest.Wait()
				if idle := consumerGoroutines(); idle > inFlight {
					t.Fatalf("idle 10 s, no Poll: %d goroutines of the consumer; want at most its %d fetches", idle, inFlight)
				}
				fetches, most := n.stats()
				waits := 0
				for _, s := range n.took() {
					if strings.HasPrefix(s, "wait ") {
						waits++
					}
				}
				if !plain && waits != 1 {
					t.Fatalf("idle 10 s: the wait asked %d times; want once", waits)
				}
				// 40 first reads, then 4 turns of 250 ms at a time for 10 s.
				if most > inFlight || fetches > partitions+inFlight*int(10*time.Second/rotatingWait)+inFlight {
					t.Fatalf("idle 10 s: %d fetches, %d at once; want at most %d at once, each idle poll %v", fetches, most, inFlight, rotatingWait)
				}
				start := time.Now()
				got = pollAsync(context.Background(), k)
				n.append(37, "x")
				r := <-got
				turn := partitions / inFlight * rotatingWait
				if r.err != nil || r.b.Partition != 37 || string(r.b.Records[0].Value) != "x" || time.Since(start) > turn {
					t.Fatalf("a commit to partition 37: %+v, %v after %v; want it within a turn, %v", r.b, r.err, time.Since(start), turn)
				}
			})
		})
	}
}

// TestConsumer_CloseEndsTheWait: Close ends the wait in flight at once
// and a Poll waiting returns ErrConsumerClosed.
func TestConsumer_CloseEndsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 20)
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: 2})
		if err != nil {
			t.Fatal(err)
		}
		got := pollAsync(context.Background(), k)
		synctest.Wait()
		n.mu.Lock()
		inFlight, waits := n.inFlight, n.waits
		n.mu.Unlock()
		if inFlight != 1 || waits != 1 {
			t.Fatalf("idle: %d requests in flight, %d waits; want the one wait", inFlight, waits)
		}
		k.Close()
		n.mu.Lock()
		inFlight = n.inFlight
		n.mu.Unlock()
		if inFlight != 0 {
			t.Fatalf("after Close: %d requests in flight", inFlight)
		}
		if r := <-got; !errors.Is(r.err, ErrConsumerClosed) {
			t.Fatalf("a Poll waiting when Close came: %v", r.err)
		}
	})
}

// TestConsumer_AFailingWaitBacksOff: a wait that fails is Poll's error (a
// *WaitError naming the partitions) and is sent again on the client's
// backoff schedule, 50 ms doubling to 2 s: at most 10 in 10 s of a caller
// polling on through its errors; once the node answers again, a record
// committed meanwhile is read.
func TestConsumer_AFailingWaitBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 20)
		n.waitFails = 1000
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		failed := 0
		for ctx.Err() == nil {
			b, err := k.Poll(ctx)
			var we *WaitError
			switch {
			case errors.As(err, &we) && errors.Is(err, ErrInternal) && len(we.Partitions) == 20 && we.Node == "":
				failed++
			case errors.Is(err, context.DeadlineExceeded):
			default:
				t.Fatalf("poll: %+v, %v", b, err)
			}
		}
		fetches, waits := n.requests()
		// Sent at 0, 50, 150, 350, 750, 1550, 3150, 5150, 7150 and 9150 ms.
		if fetches != 20 || waits != 10 || failed != waits {
			t.Fatalf("10 s of failing waits: %d fetches, %d waits, %d errors; want 20 (the first reads), 10, one error each", fetches, waits, failed)
		}
		n.mu.Lock()
		n.waitFails = 0
		n.mu.Unlock()
		n.append(5, "x")
		b, err := k.Poll(context.Background())
		if err != nil || b.Partition != 5 || string(b.Records[0].Value) != "x" {
			t.Fatalf("once the node answers again: %+v, %v", b, err)
		}
	})
}

// TestConsumer_AWaitOnATopicMadeAgainEnds: the wait names the
// incarnation the consumer reads; a topic deleted and made again answers
// it topic_not_found, which ends the consumer: every Poll returns it,
// nothing is asked again.
func TestConsumer_AWaitOnATopicMadeAgainEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 20)
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the bubble's clock: a wait's answer, or none
		defer cancel()
		got := pollAsync(ctx, k)
		synctest.Wait()
		n.mu.Lock()
		n.incarnation = "00000000000000b2"
		close(n.changed) // the node wakes its waits at a delete
		n.changed = make(chan struct{})
		n.mu.Unlock()
		r := <-got
		var we *WaitError
		if !errors.Is(r.err, ErrTopicNotFound) || !errors.As(r.err, &we) {
			t.Fatalf("the wait, the topic made again: %v", r.err)
		}
		fetches, waits := n.requests()
		for i := range 100 {
			if _, err := k.Poll(context.Background()); !errors.Is(err, ErrTopicNotFound) {
				t.Fatalf("poll %d after the topic went: %v", i, err)
			}
		}
		if f, w := n.requests(); f != fetches || w != waits {
			t.Fatalf("100 polls after the topic went: %d fetches, %d waits more; want none", f-fetches, w-waits)
		}
	})
}

// TestConsumer_APartitionCaughtUpLaterRenewsTheWait: a partition with
// records to read when the wait went out is not named by it; once read
// up, the wait is ended and sent again naming it, so a record committed
// to it then is read at once, not at the end of the stale wait.
func TestConsumer_APartitionCaughtUpLaterRenewsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 10)
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: 2, MaxRecords: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		got := pollAsync(context.Background(), k)
		synctest.Wait()
		n.took()
		n.append(0, "a", "b", "c")
		for i := range 3 {
			r := <-got
			if r.err != nil || r.b.Partition != 0 || len(r.b.Records) != 1 || r.b.Records[0].Offset != int64(i) {
				t.Fatalf("poll %d: %+v, %v", i, r.b, r.err)
			}
			got = pollAsync(context.Background(), k)
		}
		synctest.Wait()
		served := n.took()
		slices.Sort(served)
		want := []string{"0@0 0s", "0@1 0s", "0@2 0s", "wait " + positions(0, 10, map[int]int64{0: 3}) + " 30s", "wait " + positions(1, 10, nil) + " 30s"}
		if !slices.Equal(served, want) {
			t.Fatalf("partition 0 read up while the others were waited on: served %q\nwant %q", served, want)
		}
		n.append(0, "d")
		r := <-got
		if r.err != nil || r.b.Partition != 0 || string(r.b.Records[0].Value) != "d" {
			t.Fatalf("a record to partition 0 once it was read up: %+v, %v", r.b, r.err)
		}
		synctest.Wait()
		if served := n.took(); fmt.Sprint(served) != "[0@3 0s wait "+positions(0, 10, map[int]int64{0: 4})+" 30s]" {
			t.Fatalf("after a record to partition 0: served %q; want its fetch and the next wait: the wait out named it", served)
		}
	})
}

// TestConsumer_AFetchDueEndsAWaitInTheOnlySlot: with one request in
// flight, the wait on the idle partitions gives its slot up to a
// partition whose backoff has passed: the failing partition is fetched
// on its schedule (10 times in 10 s), not once per wait.
func TestConsumer_AFetchDueEndsAWaitInTheOnlySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 5)
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders",
			ConsumerOptions{Follow: true, MaxInFlight: 1, Start: StartAtOffsets(map[int]int64{0: 5, 1: 0, 2: 0, 3: 0, 4: 0})})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			var pe *PartitionError
			if _, err := k.Poll(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &pe) && pe.Partition == 0) {
				t.Fatal(err)
			}
		}
		fetches0, waits := 0, 0
		for _, s := range n.took() {
			switch {
			case strings.HasPrefix(s, "0@"):
				fetches0++
			case strings.HasPrefix(s, "wait "):
				waits++
			}
		}
		if _, most := n.stats(); fetches0 != 10 || waits < 2 || most != 1 {
			t.Fatalf("10 s: partition 0 fetched %d times, %d waits, %d requests at once; want 10 (its backoff), the waits between, one at a time", fetches0, waits, most)
		}
	})
}

// hosts is a fake cluster of topicNodes by host.
type hosts map[string]*topicNode

func (h hosts) RoundTrip(r *http.Request) (*http.Response, error) {
	return h[r.URL.Host].RoundTrip(r)
}

// twoOwners is a topic of partitions on two fake nodes: a (the node the
// client is made with) owns the even ones, b the odd ones.
func twoOwners(partitions int) (a, b *topicNode, c *Client) {
	a, b = newTopicNode("orders", partitions), newTopicNode("orders", partitions)
	for p := range partitions {
		if p%2 == 1 {
			a.elsewhere[p] = "http://127.0.0.1:7481"
		} else {
			b.elsewhere[p] = "http://127.0.0.1:7480"
		}
	}
	c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: hosts{"127.0.0.1:7480": a, "127.0.0.1:7481": b}}})
	if err != nil {
		panic(err)
	}
	return a, b, c
}

// waitsIn keeps the waits of what a node served.
func waitsIn(served []string) []string {
	var out []string
	for _, s := range served {
		if strings.HasPrefix(s, "wait ") {
			out = append(out, s)
		}
	}
	return out
}

// TestConsumer_OneWaitPerOwner: partitions of two nodes, learned from the
// 421s of their first fetches: each node gets one wait naming its own
// idle partitions, a record committed on either is read, idle they cost
// a wait per 30 s each; a partition moved from b to a (b's wait answers
// it not_here) is fetched once, found on a, and named by a's next wait,
// b's naming the rest.
func TestConsumer_OneWaitPerOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := twoOwners(10)
		k, err := c.NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		evens, odds := "[0@0 2@0 4@0 6@0 8@0]", "[1@0 3@0 5@0 7@0 9@0]"
		got := pollAsync(context.Background(), k)
		synctest.Wait()
		if wa, wb := waitsIn(a.took()), waitsIn(b.took()); fmt.Sprint(wa) != "[wait "+evens+" 30s]" || fmt.Sprint(wb) != "[wait "+odds+" 30s]" {
			t.Fatalf("idle: a waited %v, b %v; want one each, on its own partitions", wa, wb)
		}
		for _, at := range []struct {
			n *topicNode
			p int
		}{{b, 7}, {a, 4}} {
			at.n.append(at.p, "x")
			r := <-got
			if r.err != nil || r.b.Partition != at.p || string(r.b.Records[0].Value) != "x" {
				t.Fatalf("a record to partition %d: %+v, %v", at.p, r.b, r.err)
			}
			got = pollAsync(context.Background(), k)
		}
		synctest.Wait()
		a.took()
		b.took()

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute+15*time.Second)
		defer cancel()
		k.Close() // the Poll in flight ends; a new consumer idles a minute
		<-got
		k, err = c.NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: 4, Start: StartLatest()})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		idle, cancelIdle := context.WithCancel(context.Background())
		got = pollAsync(idle, k)
		synctest.Wait()
		cancelIdle()
		<-got
		fa, wa0 := a.requests()
		fb, wb0 := b.requests()
		if _, err := k.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("idle a minute: %v", err)
		}
		if fa1, wa1 := a.requests(); fa1 != fa || wa1-wa0 != 2 {
			t.Fatalf("a minute idle: a served %d fetches, %d waits; want none and 2", fa1-fa, wa1-wa0)
		}
		if fb1, wb1 := b.requests(); fb1 != fb || wb1-wb0 != 2 {
			t.Fatalf("a minute idle: b served %d fetches, %d waits; want none and 2", fb1-fb, wb1-wb0)
		}
		a.took()
		b.took()

		// Partition 3 moves from b to a.
		got = pollAsync(context.Background(), k)
		synctest.Wait()
		a.mu.Lock()
		delete(a.elsewhere, 3)
		a.mu.Unlock()
		b.mu.Lock()
		b.elsewhere[3] = "http://127.0.0.1:7480"
		close(b.changed) // b's wait looks again: 3 is not here
		b.changed = make(chan struct{})
		b.mu.Unlock()
		synctest.Wait()
		if sa, sb := a.took(), b.took(); fmt.Sprint(sa) != "[3@0 0s wait [0@0 2@0 3@0 4@1 6@0 8@0] 30s]" || fmt.Sprint(sb) != "[wait [1@0 5@0 7@1 9@0] 30s]" {
			t.Fatalf("partition 3 moved from b to a: a served %q, b %q", sa, sb)
		}
		a.append(3, "y")
		r := <-got
		if r.err != nil || r.b.Partition != 3 || string(r.b.Records[0].Value) != "y" {
			t.Fatalf("a record to partition 3 on a: %+v, %v", r.b, r.err)
		}
	})
}

// head is the first of s, or "".
func head(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// TestConsumer_MoreOwnersThanWaitsTakeTurns: with two requests in flight
// (a wait may hold one) and two nodes owning idle partitions, the nodes'
// waits take turns of rotatingWait, and a record on either is read.
func TestConsumer_MoreOwnersThanWaitsTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := twoOwners(10)
		k, err := c.NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := k.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("idle 10 s: %v", err)
		}
		wa, wb := waitsIn(a.took()), waitsIn(b.took())
		turns := int(10 * time.Second / rotatingWait)
		if len(wa)+len(wb) > turns+1 || len(wa) < turns/2-1 || len(wb) < turns/2-1 || wa[0] != "wait [0@0 2@0 4@0 6@0 8@0] 250ms" || wb[0] != "wait [1@0 3@0 5@0 7@0 9@0] 250ms" {
			t.Fatalf("idle 10 s, one wait at a time: a waited %d times, b %d (first %q, %q); want turns of %v", len(wa), len(wb), head(wa), head(wb), rotatingWait)
		}
		for _, at := range []struct {
			n *topicNode
			p int
		}{{b, 7}, {a, 4}} {
			at.n.append(at.p, "x")
			ctx, cancel := context.WithTimeout(context.Background(), 2*rotatingWait)
			b, err := k.Poll(ctx)
			cancel()
			if err != nil || b.Partition != at.p || string(b.Records[0].Value) != "x" {
				t.Fatalf("a record to partition %d: %+v, %v; want it within two turns", at.p, b, err)
			}
		}
	})
}

// killable is a node that can be made unreachable: from kill on, each
// request to it, the ones in flight too, fails as a refused connection.
type killable struct {
	rt   http.RoundTripper
	down context.Context
}

func (k killable) RoundTrip(r *http.Request) (*http.Response, error) {
	if k.down.Err() != nil {
		return nil, errors.New("connection refused")
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(k.down, cancel)()
	resp, err := k.rt.RoundTrip(r.WithContext(ctx))
	if k.down.Err() != nil {
		return nil, errors.New("connection refused")
	}
	return resp, err
}

// TestConsumer_ADeadOwnerReleasesAllItsPartitions: b owns the 5 odd
// partitions, each learned from a 421 of its own; they move to a and b
// dies during its wait. The one failed wait forgets b as the owner of
// all 5: the next wait asks a, and a record committed to each of them
// there is read with no second failure.
func TestConsumer_ADeadOwnerReleasesAllItsPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _ := twoOwners(10)
		down, kill := context.WithCancel(context.Background())
		defer kill()
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: hostsRT{"127.0.0.1:7480": a, "127.0.0.1:7481": killable{b, down}}}})
		if err != nil {
			t.Fatal(err)
		}
		k, err := c.NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		got := pollAsync(context.Background(), k)
		synctest.Wait()
		if wb := waitsIn(b.took()); len(wb) != 1 {
			t.Fatalf("idle: b waited %v; want one wait on its partitions", wb)
		}
		a.mu.Lock()
		for p := 1; p < 10; p += 2 {
			delete(a.elsewhere, p)
		}
		a.mu.Unlock()
		for p := 1; p < 10; p += 2 {
			a.append(p, fmt.Sprint("x", p))
		}
		kill()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the bubble's clock
		defer cancel()
		failed, read := 0, map[int]string{}
		for len(read) < 5 {
			r := <-got
			var we *WaitError
			switch {
			case errors.As(r.err, &we) && we.Node == "http://127.0.0.1:7481" && len(we.Partitions) == 5:
				failed++
			case r.err == nil && r.b.Partition%2 == 1 && len(r.b.Records) == 1:
				read[r.b.Partition] = string(r.b.Records[0].Value)
			default:
				t.Fatalf("b dead, its partitions on a: %+v, %v; read %v", r.b, r.err, read)
			}
			got = pollAsync(ctx, k)
		}
		if failed != 1 || fmt.Sprint(read) != "map[1:x1 3:x3 5:x5 7:x7 9:x9]" {
			t.Fatalf("b dead: %d failed waits, read %v; want one failure, then each record", failed, read)
		}
		k.Close()
		<-got
	})
}

// hostsRT routes a request to a RoundTripper by host.
type hostsRT map[string]http.RoundTripper

func (h hostsRT) RoundTrip(r *http.Request) (*http.Response, error) {
	return h[r.URL.Host].RoundTrip(r)
}

// fetchCap ends a consumer's loop that would run without the bubble's
// clock moving: past max fetches, a fetch waits for its request's end.
type fetchCap struct {
	n   *topicNode
	max int
}

func (f fetchCap) RoundTrip(r *http.Request) (*http.Response, error) {
	if fetches, _ := f.n.requests(); fetches >= f.max && strings.HasSuffix(r.URL.Path, "/records") {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return f.n.RoundTrip(r)
}

// TestConsumer_AWaitAnsweringUnknownBacksOff: a node that answers each
// partition a wait names ready at -1 (it cannot read its boundaries),
// forever: each partition's fetch finds nothing new, and it is fetched
// again on the retry schedule, not at once after each wait. Once the node
// reads again, a record committed is read.
func TestConsumer_AWaitAnsweringUnknownBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const partitions = 20
		n := newTopicNode("orders", partitions)
		n.hwmUnknown = true
		// Fetches of a partition in a minute: its first read, one at once
		// after the first ready, then one after each backoff.
		perPartition, spent := 2, time.Duration(0)
		for i := 0; spent+retryWait(i, nil) <= time.Minute; i++ {
			spent += retryWait(i, nil)
			perPartition++
		}
		bound := partitions * perPartition
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: fetchCap{n, 20 * bound}}})
		if err != nil {
			t.Fatal(err)
		}
		k, err := c.NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxInFlight: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if b, err := k.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a minute of ready at -1: %+v, %v", b, err)
		}
		fetches, waits := n.requests()
		t.Logf("a minute of ready at -1: %d fetches, %d waits", fetches, waits)
		if fetches > bound || waits > fetches {
			t.Fatalf("a minute of ready at -1: %d fetches, %d waits; want at most %d fetches (%d a partition, the retry schedule), no more waits", fetches, waits, bound, perPartition)
		}
		n.mu.Lock()
		n.hwmUnknown = false
		n.mu.Unlock()
		n.append(3, "x")
		b, err := k.Poll(context.Background())
		if err != nil || b.Partition != 3 || string(b.Records[0].Value) != "x" {
			t.Fatalf("once the node reads again: %+v, %v", b, err)
		}
	})
}
