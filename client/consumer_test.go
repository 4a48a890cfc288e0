package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/api"
)

// drainConsumer polls k until io.EOF and returns each partition's values
// in the order Poll gave them, and the gaps.
func drainConsumer(t *testing.T, k *Consumer) (map[int][]string, []Gap) {
	t.Helper()
	got := map[int][]string{}
	var gaps []Gap
	for {
		b, err := k.Poll(context.Background())
		if errors.Is(err, io.EOF) {
			return got, gaps
		}
		if err != nil {
			t.Fatal(err)
		}
		if b.Gap != nil {
			gaps = append(gaps, *b.Gap)
		}
		for _, r := range b.Records {
			if want := int64(len(got[b.Partition])); r.Offset < want {
				t.Fatalf("partition %d: offset %d after %d records: out of order or twice", b.Partition, r.Offset, want)
			}
			got[b.Partition] = append(got[b.Partition], string(r.Value))
		}
	}
}

func values(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// TestConsumer_ReadsEveryPartitionInOrder: every record of every
// partition, each partition in offset order, in batches of MaxRecords;
// then io.EOF, again and again. (The bound of MaxInFlight is proven on
// waiting fetches, TestConsumer_ManyPartitionsTakeTurns: these are
// answered too fast to overlap surely.)
func TestConsumer_ReadsEveryPartitionInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 10)
		for p := range 10 {
			n.append(p, values(fmt.Sprintf("p%d-", p), p*3)...) // partition 0 is empty
		}
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{MaxRecords: 2, MaxInFlight: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		got, gaps := drainConsumer(t, k)
		for p := range 10 {
			if want := values(fmt.Sprintf("p%d-", p), p*3); !slices.Equal(got[p], want) {
				t.Errorf("partition %d: %q, want %q", p, got[p], want)
			}
		}
		if len(gaps) != 0 {
			t.Errorf("gaps %v in a topic without any", gaps)
		}
		if _, most := n.stats(); most > 3 {
			t.Errorf("%d fetches in flight at once; MaxInFlight is 3", most)
		}
		if _, err := k.Poll(context.Background()); !errors.Is(err, io.EOF) {
			t.Errorf("a Poll after the end: %v, want io.EOF", err)
		}
		k.Close()
		if _, err := k.Poll(context.Background()); !errors.Is(err, ErrConsumerClosed) {
			t.Errorf("a Poll after Close: %v, want ErrConsumerClosed", err)
		}
	})
}

// TestConsumer_Starts: latest, one offset for every partition, an offset
// per partition, a time; and the starts that cannot apply are refused
// before anything is read.
func TestConsumer_Starts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 3)
		for p := range 3 {
			n.append(p, values("v", 6)...)
		}
		c := n.client(Options{})
		read := func(opts ConsumerOptions) map[int][]string {
			t.Helper()
			k, err := c.NewConsumer(context.Background(), "orders", opts)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			got, _ := drainConsumer(t, k)
			return got
		}
		if got := read(ConsumerOptions{Start: StartLatest()}); len(got) != 0 {
			t.Errorf("latest: %v, want nothing", got)
		}
		if got := read(ConsumerOptions{Start: StartAtOffset(4)}); fmt.Sprint(got) != "map[0:[v4 v5] 1:[v4 v5] 2:[v4 v5]]" {
			t.Errorf("offset 4: %v", got)
		}
		got := read(ConsumerOptions{Start: StartAtOffsets(map[int]int64{0: 5, 2: 1}), Partitions: []int{2, 0}})
		if fmt.Sprint(got) != "map[0:[v5] 2:[v1 v2 v3 v4 v5]]" {
			t.Errorf("offsets per partition: %v", got)
		}
		if got := read(ConsumerOptions{Start: StartAtTime(time.UnixMilli(3))}); fmt.Sprint(got) != "map[0:[v3 v4 v5] 1:[v3 v4 v5] 2:[v3 v4 v5]]" {
			t.Errorf("a time: %v", got) // the fake commits offset i at i ms
		}

		// Latest is each partition's high watermark when NewConsumer runs.
		k, err := c.NewConsumer(context.Background(), "orders", ConsumerOptions{Start: StartLatest(), Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // every partition read at its high watermark, long-polled
		n.append(1, "new")
		b, err := k.Poll(context.Background())
		if err != nil || b.Partition != 1 || len(b.Records) != 1 || b.Records[0].Offset != 6 || string(b.Records[0].Value) != "new" {
			t.Errorf("latest, following: %+v, %v", b, err)
		}
		k.Close()

		for _, bad := range []ConsumerOptions{
			{Start: StartAtOffsets(map[int]int64{0: 1, 1: 1})},                       // partition 2 has none
			{Start: StartAtOffsets(map[int]int64{0: 1, 1: 1}), Partitions: []int{0}}, // 1 is not read
			{Start: StartAtOffset(-1)},                                               //
			{Partitions: []int{3}},                                                   // no such partition
			{Partitions: []int{1, 1}},                                                // twice
			{Partitions: []int{}},                                                    // nothing to read
			{Cursor: "audit", Start: StartAtOffset(2)},                               // a cursor starts at earliest or latest
			{Wait: 61 * time.Second},                                                 //
			{MaxInFlight: -1},                                                        //
		} {
			if k, err := c.NewConsumer(context.Background(), "orders", bad); err == nil {
				k.Close()
				t.Errorf("NewConsumer(%+v) was accepted", bad)
			}
		}
		if _, err := c.NewConsumer(context.Background(), "missing", ConsumerOptions{}); !errors.Is(err, ErrTopicNotFound) {
			t.Errorf("a missing topic: %v, want ErrTopicNotFound", err)
		}
	})
}

// TestConsumer_FollowWaitsOnEveryPartitionWhenFew: with as many fetches
// in flight as partitions, each idle partition holds its own long poll,
// and a record committed to any of them comes at once.
func TestConsumer_FollowWaitsOnEveryPartitionWhenFew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 4)
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, Wait: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		polled := make(chan Batch)
		go func() {
			b, err := k.Poll(context.Background())
			if err != nil {
				t.Error(err)
			}
			polled <- b
		}()
		synctest.Wait()
		fetches, most := n.stats()
		n.mu.Lock()
		served := slices.Clone(n.served)
		n.mu.Unlock()
		slices.Sort(served)
		if fetches != 8 || most != 4 || fmt.Sprint(served) != "[0@0 0s 0@0 20s 1@0 0s 1@0 20s 2@0 0s 2@0 20s 3@0 0s 3@0 20s]" {
			t.Fatalf("idle: %d fetches, %d at once: %v; want each partition read, then long-polled (20s), 4 at once", fetches, most, served)
		}
		start := time.Now()
		n.append(3, "x")
		b := <-polled
		if b.Partition != 3 || len(b.Records) != 1 || time.Since(start) != 0 {
			t.Fatalf("a commit to an idle partition: %+v after %v; want it at once", b, time.Since(start))
		}
	})
}

// TestConsumer_GapsAndDamage: records retention deleted are stepped over
// (a Gap, but not from the earliest start, where they are no news); a
// damaged frame is ErrRecordUnreadable at every Poll until the caller
// gives up, or with SkipDamaged a Gap and the records after it.
func TestConsumer_GapsAndDamage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 2)
		n.append(0, values("a", 6)...)
		n.append(1, values("b", 6)...)
		n.parts[0].start = 2
		n.parts[1].damageFrom, n.parts[1].damageTo = 3, 5
		c := n.client(Options{})

		k, err := c.NewConsumer(context.Background(), "orders", ConsumerOptions{Partitions: []int{0}})
		if err != nil {
			t.Fatal(err)
		}
		got, gaps := drainConsumer(t, k)
		k.Close()
		if fmt.Sprint(got[0]) != "[a2 a3 a4 a5]" || len(gaps) != 0 {
			t.Errorf("earliest over deleted records: %v, gaps %v", got, gaps)
		}
		k, err = c.NewConsumer(context.Background(), "orders", ConsumerOptions{Partitions: []int{0}, Start: StartAtOffset(0)})
		if err != nil {
			t.Fatal(err)
		}
		got, gaps = drainConsumer(t, k)
		k.Close()
		if fmt.Sprint(got[0]) != "[a2 a3 a4 a5]" || fmt.Sprint(gaps) != "[{0 2 true}]" {
			t.Errorf("offset 0 over deleted records: %v, gaps %v", got, gaps)
		}

		k, err = c.NewConsumer(context.Background(), "orders", ConsumerOptions{Partitions: []int{1}})
		if err != nil {
			t.Fatal(err)
		}
		var read []string
		for range 2 {
			for {
				b, err := k.Poll(context.Background())
				if err != nil {
					var e *Error
					var pe *PartitionError
					if !errors.Is(err, ErrRecordUnreadable) || !errors.As(err, &e) || *e.NextOffset != 5 || !errors.As(err, &pe) || pe.Partition != 1 || pe.Offset != 3 ||
						!strings.Contains(err.Error(), "partition 1 at offset 3") {
						t.Fatalf("a damaged frame: %v", err)
					}
					break
				}
				for _, r := range b.Records {
					read = append(read, string(r.Value))
				}
			}
		}
		k.Close()
		if fmt.Sprint(read) != "[b0 b1 b2]" {
			t.Errorf("before the damaged frame: %v", read)
		}
		k, err = c.NewConsumer(context.Background(), "orders", ConsumerOptions{Partitions: []int{1}, SkipDamaged: true})
		if err != nil {
			t.Fatal(err)
		}
		got, gaps = drainConsumer(t, k)
		k.Close()
		if fmt.Sprint(got[1]) != "[b0 b1 b2 b5]" || fmt.Sprint(gaps) != "[{3 5 false}]" {
			t.Errorf("SkipDamaged: %v, gaps %v", got, gaps)
		}
	})
}

// TestConsumer_CursorCommitsWhatPollReturned: a consumer through a
// cursor makes it (at Start) where the topic has none, begins each
// partition at the cursor's position, and Commit moves the cursor past
// what Poll returned, asking only the partitions that moved; a second
// consumer resumes there.
func TestConsumer_CursorCommitsWhatPollReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 3)
		for p := range 3 {
			n.append(p, values("v", 4)...)
		}
		c := n.client(Options{})
		k, err := c.NewConsumer(context.Background(), "orders", ConsumerOptions{Cursor: "audit", MaxRecords: 3, Partitions: []int{0, 1}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := k.Poll(context.Background())
		if err != nil || len(b.Records) != 3 {
			t.Fatalf("first poll: %+v, %v", b, err)
		}
		if err := k.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		positions := slices.Clone(n.cursors["audit"])
		n.mu.Unlock()
		want := []int64{0, 0, 0}
		want[b.Partition] = 3
		if !slices.Equal(positions, want) {
			t.Fatalf("after one batch of partition %d committed: %v, want %v", b.Partition, positions, want)
		}
		k.Close()

		k, err = c.NewConsumer(context.Background(), "orders", ConsumerOptions{Cursor: "audit", Start: StartLatest()})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := drainConsumer(t, k)
		want[2] = 0
		for p := range 3 {
			if len(got[p]) != 4-int(want[p]) {
				t.Errorf("resumed: partition %d read %v from the cursor at %d", p, got[p], want[p])
			}
		}
		if err := k.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		k.Close()
		n.mu.Lock()
		positions = slices.Clone(n.cursors["audit"])
		n.mu.Unlock()
		if !slices.Equal(positions, []int64{4, 4, 4}) {
			t.Errorf("after everything was committed: %v", positions)
		}

		k, err = c.NewConsumer(context.Background(), "orders", ConsumerOptions{Cursor: "tail", Start: StartLatest()})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := drainConsumer(t, k); len(got) != 0 {
			t.Errorf("a new cursor at latest read %v", got)
		}
		k.Close()
		k, err = c.NewConsumer(context.Background(), "orders", ConsumerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Commit(context.Background()); err == nil {
			t.Error("Commit without a cursor succeeded")
		}
		k.Close()
	})
}

// TestConsumer_FollowsOwners: the node asked owns no partition: the
// consumer's fetches follow its 421 answers to the owner, and its cursor
// is made and read on the owner the description names.
func TestConsumer_FollowsOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		owner := newTopicNode("orders", 2)
		owner.append(0, "a")
		owner.append(1, "b")
		cl := &cluster{nodes: map[string]func(*http.Request) *http.Response{
			"127.0.0.1:7481": func(r *http.Request) *http.Response {
				resp, err := owner.RoundTrip(r)
				if err != nil {
					panic(err)
				}
				return resp
			},
			"127.0.0.1:7480": func(r *http.Request) *http.Response {
				switch {
				case strings.Contains(r.URL.Path, "/partitions/"):
					return misdirected("http://127.0.0.1:7481")
				case strings.Contains(r.URL.Path, "/cursors/"):
					return errorAnswer(404, api.CodeCursorNotFound, nil) // it owns none of the partitions
				}
				d := api.TopicDescription{Name: "orders", Incarnation: owner.incarnation}
				for p := range 2 {
					d.Partitions = append(d.Partitions, api.PartitionDescription{Partition: p, Remote: true, Owner: &Owner{NodeID: "b", Addr: "http://127.0.0.1:7481"}})
				}
				return jsonAnswer(200, d)
			},
		}}
		c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: cl}})
		if err != nil {
			t.Fatal(err)
		}
		k, err := c.NewConsumer(context.Background(), "orders", ConsumerOptions{Cursor: "audit"})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		got, _ := drainConsumer(t, k)
		if fmt.Sprint(got) != "map[0:[a] 1:[b]]" {
			t.Fatalf("read through the owner: %v", got)
		}
		if err := k.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		owner.mu.Lock()
		positions := slices.Clone(owner.cursors["audit"])
		owner.mu.Unlock()
		if !slices.Equal(positions, []int64{1, 1}) {
			t.Fatalf("the owner's cursor: %v", positions)
		}
		var asked []string
		for _, call := range cl.took() {
			if strings.Contains(call, "/cursors/audit") {
				asked = append(asked, call)
			}
		}
		want := "[127.0.0.1:7481 PUT /v1/topics/orders/cursors/audit 127.0.0.1:7481 PUT /v1/topics/orders/cursors/audit/partitions/0 " +
			"127.0.0.1:7481 PUT /v1/topics/orders/cursors/audit/partitions/1]"
		if fmt.Sprint(asked) != want {
			t.Fatalf("the cursor's calls: %v\nwant %v", asked, want)
		}
	})
}

// TestConsumer_CloseEndsLongPolls: Close ends the long polls in flight
// and waits for their goroutines (synctest fails a test whose bubble
// keeps a goroutine).
func TestConsumer_CloseEndsLongPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 3)
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			synctest.Wait()
			cancel()
		}()
		if _, err := k.Poll(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("a Poll whose context ends: %v", err)
		}
		start := time.Now()
		k.Close()
		if time.Since(start) != 0 {
			t.Fatalf("Close took %v: it waited out the long polls", time.Since(start))
		}
	})
}

// TestConsumer_LatestIsTakenInNewConsumer: with more partitions than
// fetches in flight, a record committed to any partition after
// NewConsumer(StartLatest) returned is read: the latest start of every
// partition was taken before NewConsumer returned, not on its first turn.
func TestConsumer_LatestIsTakenInNewConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const partitions = 6
		n := newTopicNode("orders", partitions)
		for p := range partitions {
			n.append(p, "old")
		}
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Start: StartLatest(), Follow: true, MaxInFlight: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		n.append(partitions-1, "new")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the bubble's clock: many turns
		defer cancel()
		for {
			b, err := k.Poll(ctx)
			if err != nil {
				t.Fatalf("the record committed to partition %d after NewConsumer: never read (%v)", partitions-1, err)
			}
			if len(b.Records) > 0 {
				if b.Partition != partitions-1 || len(b.Records) != 1 || b.Records[0].Offset != 1 || string(b.Records[0].Value) != "new" {
					t.Fatalf("read %+v; want only partition %d's record at offset 1", b, partitions-1)
				}
				return
			}
		}
	})
}

// TestConsumer_OneOffsetForAllStopsAtShortPartitions: StartAtOffset(N)
// begins a partition holding fewer than N records at its high watermark:
// without Follow it is read to its end (nothing), with Follow it is
// long-polled there and what commits next is read. Offsets given one per
// partition are the caller's own: one beyond the high watermark is a
// PartitionError.
func TestConsumer_OneOffsetForAllStopsAtShortPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 3)
		n.append(0, values("a", 6)...)
		n.append(1, values("b", 2)...) // partition 2 is empty
		c := n.client(Options{})
		k, err := c.NewConsumer(context.Background(), "orders", ConsumerOptions{Start: StartAtOffset(4)})
		if err != nil {
			t.Fatal(err)
		}
		got, gaps := drainConsumer(t, k)
		k.Close()
		if fmt.Sprint(got) != "map[0:[a4 a5]]" || len(gaps) != 0 {
			t.Fatalf("offset 4 over partitions of 6, 2 and 0 records: %v, gaps %v", got, gaps)
		}

		k, err = c.NewConsumer(context.Background(), "orders", ConsumerOptions{Start: StartAtOffset(4), Follow: true, Partitions: []int{1, 2}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // both long-polled at their high watermarks
		n.append(1, "b2")
		b, err := k.Poll(context.Background())
		k.Close()
		if err != nil || b.Partition != 1 || len(b.Records) != 1 || b.Records[0].Offset != 2 {
			t.Fatalf("following from offset 4, a record to partition 1 at its high watermark 2: %+v, %v", b, err)
		}

		k, err = c.NewConsumer(context.Background(), "orders", ConsumerOptions{Start: StartAtOffsets(map[int]int64{1: 4}), Partitions: []int{1}})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		var pe *PartitionError
		if _, err := k.Poll(context.Background()); !errors.Is(err, ErrOffsetBeyondHighWatermark) || !errors.As(err, &pe) || pe.Partition != 1 || pe.Offset != 4 {
			t.Fatalf("partition 1 from its own offset 4, beyond its 3 records: %v", err)
		}
	})
}

// TestConsumer_AFailingPartitionBacksOff: a partition that fails at every
// fetch (here an offset of its own beyond its high watermark) is fetched
// again on the client's backoff schedule, 50 ms doubling to 2 s, not at
// every Poll: a caller that polls on through its errors for 10 s (the
// bubble's clock) makes at most 10 fetches of it; and the other
// partitions are read meanwhile.
func TestConsumer_AFailingPartitionBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 2)
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Start: StartAtOffsets(map[int]int64{0: 5, 1: 0}), Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		polls, failed := 0, 0
		for ; polls < 10000 && ctx.Err() == nil; polls++ {
			if polls == 10 {
				n.append(1, "b0")
			}
			b, err := k.Poll(ctx)
			var pe *PartitionError
			switch {
			case errors.As(err, &pe) && errors.Is(err, ErrOffsetBeyondHighWatermark) && pe.Partition == 0:
				failed++
			case err == nil && b.Partition == 1 && len(b.Records) == 1:
			case errors.Is(err, context.DeadlineExceeded):
			default:
				t.Fatalf("poll %d: %+v, %v", polls, b, err)
			}
		}
		n.mu.Lock()
		var fetches0 []string
		for _, f := range n.served {
			if strings.HasPrefix(f, "0@") {
				fetches0 = append(fetches0, f)
			}
		}
		n.mu.Unlock()
		// Fetched at 0, 50, 150, 350, 750, 1550, 3150, 5150, 7150 and 9150 ms.
		if len(fetches0) > 10 || failed != len(fetches0) {
			t.Fatalf("%d polls in 10 s: %d errors, partition 0 fetched %d times; want at most 10, one error each", polls, failed, len(fetches0))
		}
	})
}

// TestConsumer_ATerminalErrorSticks: once a partition's fetch says the
// topic is gone (deleted, or made again: another incarnation), every Poll
// returns that error at once and nothing is fetched again.
func TestConsumer_ATerminalErrorSticks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 3)
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			synctest.Wait() // every partition read, and long-polled
			cancel()
		}()
		if _, err := k.Poll(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("polling an idle topic: %v", err)
		}
		n.mu.Lock()
		n.incarnation = "00000000000000b2"
		n.mu.Unlock()
		fetchesBefore, _ := n.stats()
		start := time.Now()
		for i := range 100 {
			if _, err := k.Poll(context.Background()); !errors.Is(err, ErrTopicNotFound) {
				t.Fatalf("poll %d after the topic went: %v", i, err)
			}
		}
		if fetches, _ := n.stats(); fetches != fetchesBefore {
			t.Fatalf("100 polls after the topic went: %d fetches; want each partition's long poll ended, no more", fetches-fetchesBefore)
		}
		if time.Since(start) > time.Second {
			t.Fatalf("100 polls took %v: want the first long poll to end (1 s) and the rest at once", time.Since(start))
		}
	})
}

// TestConsumer_CloseFromAnotherGoroutine: Close from another goroutine
// while Polls run, each returning a record, then waiting in long polls:
// the Poll returns ErrConsumerClosed, Close returns once every fetch has
// ended, and nothing is fetched after it (run with -race: closed and the
// fetches' WaitGroup are shared by the two goroutines).
func TestConsumer_CloseFromAnotherGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTopicNode("orders", 2)
		n.append(0, values("a", 100)...)
		n.append(1, values("b", 100)...)
		k, err := n.client(Options{}).NewConsumer(context.Background(), "orders", ConsumerOptions{Follow: true, MaxRecords: 1})
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan struct{})
		polled := make(chan error)
		go func() {
			for i := 0; ; i++ {
				if _, err := k.Poll(context.Background()); err != nil {
					polled <- err
					return
				}
				if i == 0 {
					close(first)
				}
			}
		}()
		<-first
		k.Close()
		fetches, _ := n.stats()
		if err := <-polled; !errors.Is(err, ErrConsumerClosed) {
			t.Fatalf("Polls running when Close came: %v, want ErrConsumerClosed", err)
		}
		synctest.Wait()
		n.mu.Lock()
		after, inFlight := n.fetches, n.inFlight
		n.mu.Unlock()
		if after != fetches || inFlight != 0 {
			t.Fatalf("after Close returned: %d fetches more, %d in flight; want none", after-fetches, inFlight)
		}
		if _, err := k.Poll(context.Background()); !errors.Is(err, ErrConsumerClosed) {
			t.Fatalf("a Poll after Close: %v", err)
		}
	})
}
