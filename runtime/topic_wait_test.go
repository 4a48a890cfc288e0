package runtime

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// waitResult is what a WaitTopic run in the background answered.
type waitResult struct {
	out TopicWait
	err error
}

// waitInBackground runs WaitTopic for d of the bubble's clock and
// returns the channel its answer comes on.
func waitInBackground(n *testNode, topic string, positions map[int]int64, d time.Duration) <-chan waitResult {
	done := make(chan waitResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, d)
		defer cancel()
		out, err := n.WaitTopic(ctx, topic, "", positions)
		done <- waitResult{out, err}
	}()
	return done
}

// stillWaiting fails the test if the wait has answered.
func stillWaiting(t *testing.T, done <-chan waitResult, when string) {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-done:
		t.Fatalf("%s: the wait answered %+v, %v", when, r.out, r.err)
	default:
	}
}

func readyOf(out TopicWait) []TopicWaitReady { return out.Ready }

// TestWaitTopic_ACommitOfAnyPartitionWaitedOnAnswers: a topic-wide wait
// at every partition's high watermark answers at once when one is past
// its position, waits otherwise, and answers the partition a commit
// advanced (and only it) as soon as it commits; a commit to a partition
// it does not wait on leaves it waiting.
func TestWaitTopic_ACommitOfAnyPartitionWaitedOnAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "orders", 4, 3) // 3 records in each
		out, err := n.WaitTopic(bg, "orders", "", map[int]int64{0: 3, 1: 1, 2: 3})
		if err != nil || !slices.Equal(out.Ready, []TopicWaitReady{{1, 3}}) {
			t.Fatalf("a partition behind its high watermark: %+v, %v; want partition 1 at 3", out, err)
		}
		done := waitInBackground(n, "orders", map[int]int64{0: 3, 1: 3, 2: 3}, time.Hour)
		stillWaiting(t, done, "every partition at its high watermark")
		if _, err := n.Produce(bg, "orders", 3, recs("orders", 3, 3, 1)); err != nil {
			t.Fatal(err)
		}
		stillWaiting(t, done, "after a commit to a partition not waited on")
		if _, err := n.Produce(bg, "orders", 2, recs("orders", 2, 3, 2)); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || !slices.Equal(readyOf(r.out), []TopicWaitReady{{2, 5}}) || r.out.Incarnation == "" {
			t.Fatalf("after a commit to partition 2: %+v, %v; want partition 2 at 5", r.out, r.err)
		}
	})
}

// TestWaitTopic_TheDeadlineAnswersNothing: a wait nothing wakes answers
// no partition, and no error, when its context ends.
func TestWaitTopic_TheDeadlineAnswersNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "orders", 2, 1)
		start := time.Now()
		r := <-waitInBackground(n, "orders", map[int]int64{0: 1, 1: 1}, 30*time.Second)
		if r.err != nil || len(r.out.Ready) != 0 || time.Since(start) != 30*time.Second {
			t.Fatalf("%+v, %v after %v; want nothing after 30s", r.out, r.err, time.Since(start))
		}
	})
}

// TestWaitTopic_ClosedPartitionsAreWaitedOnWithoutAnOpen: a wait on
// partitions idle eviction closed opens none of them (their boundaries
// are the node's from their closes), and a commit to one opened after
// the wait began wakes it.
func TestWaitTopic_ClosedPartitionsAreWaitedOnWithoutAnOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{IdleEvictAfter: time.Minute, EvictInterval: time.Minute})
		makeTopic(t, n, "orders", 8, 2)
		advanceBy(3 * time.Minute)
		if open := n.reg.Len(); open != 0 {
			t.Fatalf("%d logs open after idle eviction", open)
		}
		positions := map[int]int64{}
		for p := range 8 {
			positions[p] = 2
		}
		done := waitInBackground(n, "orders", positions, time.Hour)
		stillWaiting(t, done, "every closed partition at its high watermark")
		if open := n.reg.Len(); open != 0 {
			t.Fatalf("the wait opened %d logs", open)
		}
		if _, err := n.Produce(bg, "orders", 5, recs("orders", 5, 2, 1)); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.err != nil || !slices.Equal(readyOf(r.out), []TopicWaitReady{{5, 3}}) {
			t.Fatalf("after a commit to a partition opened since: %+v, %v", r.out, r.err)
		}
	})
}

// TestWaitTopic_ADeleteDuringTheWaitAnswersNotFound: a topic deleted
// while a wait waits on it answers ErrTopicNotFound at once, whether the
// wait named the incarnation or not (it waits on the one it found), even
// when the topic is made again under its name at once; a wait begun on
// the new incarnation is woken by its logs' commits.
func TestWaitTopic_ADeleteDuringTheWaitAnswersNotFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "orders", 2, 1)
		rec, _, err := n.ms.Topic(bg, "orders")
		if err != nil {
			t.Fatal(err)
		}
		named := make(chan waitResult, 1)
		go func() {
			out, err := n.WaitTopic(bg, "orders", rec.Incarnation, map[int]int64{0: 1, 1: 1})
			named <- waitResult{out, err}
		}()
		unnamed := waitInBackground(n, "orders", map[int]int64{0: 1, 1: 1}, time.Hour)
		stillWaiting(t, named, "before the delete")
		stillWaiting(t, unnamed, "before the delete")
		if err := n.DeleteTopic(bg, "orders"); err != nil {
			t.Fatal(err)
		}
		makeTopic(t, n, "orders", 2, 0)
		for what, done := range map[string]<-chan waitResult{"named": named, "unnamed": unnamed} {
			if r := <-done; !errors.Is(r.err, ErrTopicNotFound) {
				t.Fatalf("a wait (incarnation %s) across a delete and a create: %+v, %v; want ErrTopicNotFound", what, r.out, r.err)
			}
		}
		again := waitInBackground(n, "orders", map[int]int64{0: 0, 1: 0}, time.Hour)
		stillWaiting(t, again, "on the new incarnation")
		if _, err := n.Produce(bg, "orders", 1, recs("orders", 1, 0, 1)); err != nil {
			t.Fatal(err)
		}
		if r := <-again; r.err != nil || !slices.Equal(readyOf(r.out), []TopicWaitReady{{1, 1}}) {
			t.Fatalf("after a commit to the new incarnation: %+v, %v", r.out, r.err)
		}
	})
}

// TestWaitTopic_PartitionsNeverOpenedAreNotOpened: the partitions of a
// topic made since the start have no boundary the node knows; the wait
// reads each from disk as the startup check does (and keeps it), opens
// none, and a commit to one wakes it.
func TestWaitTopic_PartitionsNeverOpenedAreNotOpened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "orders", 8, 0)
		positions := map[int]int64{}
		for p := range 8 {
			positions[p] = 0
		}
		done := waitInBackground(n, "orders", positions, time.Hour)
		stillWaiting(t, done, "on partitions never opened")
		if open := n.reg.Len(); open != 0 {
			t.Fatalf("the wait opened %d logs", open)
		}
		rec, _, _ := n.ms.Topic(bg, "orders")
		if hwm, ok := n.marks.highWatermark(key("orders", 6), rec.Incarnation); !ok || hwm != 0 {
			t.Fatalf("partition 6's boundary after the wait read it: %d, %v; want 0, kept", hwm, ok)
		}
		if _, err := n.Produce(bg, "orders", 3, recs("orders", 3, 0, 1)); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.err != nil || !slices.Equal(readyOf(r.out), []TopicWaitReady{{3, 1}}) {
			t.Fatalf("after a commit: %+v, %v", r.out, r.err)
		}
	})
}

// TestTopicWatch_ASubscriptionAfterTheEndIsWokenAtOnce: a wait that
// took a topic's watch before a delete ended it, and subscribes after,
// is woken at once to look at everything (and so finds the topic gone),
// never left on a watch no log announces to.
func TestTopicWatch_ASubscriptionAfterTheEndIsWokenAtOnce(t *testing.T) {
	var ws topicWatches
	w := ws.of("orders")
	ws.drop("orders")
	sub := w.subscribe(map[int]int64{0: 0})
	select {
	case <-sub.wake:
	default:
		t.Fatal("a subscription to an ended watch is not woken")
	}
	if look := w.take(sub); look != nil {
		t.Fatalf("take after the end: %v; want every partition (nil)", look)
	}
	if ws.of("orders") == w {
		t.Fatal("the ended watch is still the topic's")
	}
}

// TestTopicWatch_AnnouncementsOfAPartitionAreKeptOnce: a wait busy
// looking while one partition commits a thousand times has it once to
// look at, not a thousand times; partitions it does not wait on are not
// kept.
func TestTopicWatch_AnnouncementsOfAPartitionAreKeptOnce(t *testing.T) {
	var w topicWatch
	sub := w.subscribe(map[int]int64{1: 0, 2: 0})
	for range 1000 {
		w.announce(2)
		w.announce(7)
	}
	if look := w.take(sub); !slices.Equal(look, []int{2}) {
		t.Fatalf("take: %v; want [2]", look)
	}
	if look := w.take(sub); look == nil || len(look) != 0 {
		t.Fatalf("a second take: %v; want none, not everything", look)
	}
}

// TestWaitTopic_CloseEndsTheWait: the node's Close answers a waiting
// wait with ErrNodeClosed.
func TestWaitTopic_CloseEndsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNodeNoCleanup(t, newTestDisk(t, 1))
		if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
			t.Fatal(err)
		}
		done := waitInBackground(n, "orders", map[int]int64{0: 0}, time.Hour)
		stillWaiting(t, done, "before Close")
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		if r := <-done; !errors.Is(r.err, ErrNodeClosed) {
			t.Fatalf("a wait across Close: %+v, %v; want ErrNodeClosed", r.out, r.err)
		}
	})
}

// TestWaitTopic_AnotherNodesPartitionsAnswerAtOnce: the partitions
// another node owns are answered at once, not waited on; a partition
// past the topic's is refused.
func TestWaitTopic_AnotherNodesPartitionsAnswerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startRetentionNode(t, nil, Config{})
		makeTopic(t, n.testNode, "orders", 3, 1)
		n.wrapped.mu.Lock()
		n.wrapped.foreign[key("orders", 2)] = true
		n.wrapped.mu.Unlock()
		out, err := n.WaitTopic(bg, "orders", "", map[int]int64{0: 1, 2: 0})
		if err != nil || len(out.Ready) != 0 || !slices.Equal(out.NotHere, []int{2}) {
			t.Fatalf("%+v, %v; want partition 2 not here, nothing ready", out, err)
		}
		if _, err := n.WaitTopic(bg, "orders", "", map[int]int64{3: 0}); !errors.Is(err, ErrPartitionNotFound) {
			t.Fatalf("a partition past the topic's: %v", err)
		}
	})
}
