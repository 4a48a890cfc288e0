package runtime

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
)

// A topic-wide wait (WaitTopic) is how a reader of many partitions waits
// for records without a long poll per partition: one call names a
// position in each partition it reads, and returns as soon as any of them
// has a high watermark elsewhere. It holds no log open and opens none
// whose boundary the node knows (docs/http-api.md, "Wait for records
// across a topic").

// TopicWaitReady is a partition a topic-wide wait found ready: its high
// watermark is not the position the wait named (records past it, or a
// boundary that moved back, which a fetch at the position then reports).
type TopicWaitReady struct {
	Partition     int
	HighWatermark int64
}

// TopicWait is a topic-wide wait's answer: the partitions ready, in
// partition order, and those of the positions another node owns (the
// wait covers only this node's: a reader asks each owner for its own).
type TopicWait struct {
	Incarnation wire.IncarnationID
	Ready       []TopicWaitReady
	NotHere     []int
}

// WaitTopic waits until a partition of topic named in positions (its
// partition -> the offset the reader is at) has a high watermark other
// than that offset, and answers every such partition; or, when ctx ends
// first, answers none (no error). Partitions another node owns are
// answered at once in NotHere, without waiting. A deleted topic, or one
// that is no longer incarnation inc (when inc is given), answers
// ErrTopicNotFound, at once if it happens during the wait; a partition
// past the topic's, ErrPartitionNotFound. A commit, a boundary learned at
// an open, the topic's deletion and the node's Close wake it: it never
// polls.
func (n *Node) WaitTopic(ctx context.Context, topic string, inc wire.IncarnationID, positions map[int]int64) (TopicWait, error) {
	if err := wire.ValidateTopicName(topic); err != nil {
		return TopicWait{}, err
	}
	every := slices.Sorted(mapKeys(positions))
	// Subscribed before each look, so an announcement during it is either
	// seen by it or recorded for the next; a deleted topic's watch is
	// replaced by its successor's, and the wait moves to it.
	w := n.watches.of(topic)
	sub := w.subscribe(positions)
	defer func() { w.unsubscribe(sub) }()
	look := every
	for {
		if n.closed.Load() { // after subscribing: Close wakes every wait after it sets closed
			return TopicWait{}, ErrNodeClosed
		}
		out, err := n.checkTopicWait(ctx, topic, inc, look, positions)
		if err != nil || len(out.Ready) > 0 || len(out.NotHere) > 0 {
			return out, err
		}
		select {
		case <-sub.wake:
		case <-ctx.Done():
			return out, nil
		}
		if look = w.take(sub); look == nil { // a drop or a close: every partition again
			if now := n.watches.of(topic); now != w {
				w.unsubscribe(sub)
				w, sub = now, now.subscribe(positions)
			}
			look = every
		}
	}
}

// checkTopicWait is one look at the partitions of a topic-wide wait.
func (n *Node) checkTopicWait(ctx context.Context, topic string, inc wire.IncarnationID, parts []int, positions map[int]int64) (TopicWait, error) {
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return TopicWait{}, err
	}
	if !ok || (inc != "" && rec.Incarnation != inc) {
		return TopicWait{}, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	out := TopicWait{Incarnation: rec.Incarnation}
	for _, p := range parts {
		if p < 0 || p >= rec.Partitions {
			return TopicWait{}, fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, topic, p)
		}
		mine, err := n.ms.Assigned(ctx, topic, p)
		if err != nil {
			return TopicWait{}, err
		}
		if !mine {
			out.NotHere = append(out.NotHere, p)
			continue
		}
		hwm, err := n.waitBoundary(ctx, supervisor.Key{Topic: topic, Partition: p}, rec.Incarnation)
		if err != nil {
			return TopicWait{}, err
		}
		if hwm != positions[p] {
			out.Ready = append(out.Ready, TopicWaitReady{Partition: p, HighWatermark: hwm})
		}
	}
	return out, nil
}

// waitBoundary is key's high watermark: as the node knows it (an open
// log's, or what its close or the startup check left), or else from
// disk, or else (a boundary a crash left unwritten) from an open.
func (n *Node) waitBoundary(ctx context.Context, key supervisor.Key, id wire.IncarnationID) (int64, error) {
	if hwm, ok := n.marks.highWatermark(key, id); ok {
		return hwm, nil
	}
	if hwm, known, err := n.PeekHighWatermark(key.Topic, key.Partition); err == nil && known {
		return hwm, nil
	}
	l, err := n.log(ctx, key)
	if err != nil {
		return 0, err
	}
	return l.HighWatermark(), nil
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// topicWatches are the node's topic-wide waits' wake-ups, one per topic
// that has had a wait or an open log.
//
// Invariant: mu guards by and is a leaf.
type topicWatches struct {
	mu sync.Mutex
	by map[string]*topicWatch
}

// of is topic's watch, made on first use.
func (ws *topicWatches) of(topic string) *topicWatch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.by == nil {
		ws.by = map[string]*topicWatch{}
	}
	w := ws.by[topic]
	if w == nil {
		w = &topicWatch{}
		ws.by[topic] = w
	}
	return w
}

// drop wakes topic's waits (its incarnation is gone: they find it so)
// and forgets its watch; a new incarnation's logs get a new one.
func (ws *topicWatches) drop(topic string) {
	ws.mu.Lock()
	w := ws.by[topic]
	delete(ws.by, topic)
	ws.mu.Unlock()
	if w != nil {
		w.announce(AnyPartition)
	}
}

// wakeAll wakes every wait: the node is closing.
func (ws *topicWatches) wakeAll() {
	ws.mu.Lock()
	all := make([]*topicWatch, 0, len(ws.by))
	for _, w := range ws.by {
		all = append(all, w)
	}
	ws.mu.Unlock()
	for _, w := range all {
		w.announce(AnyPartition)
	}
}

// topicWatch is one topic's announcements to its topic-wide waits,
// made at every announcement of any of its logs (a commit, a close).
//
// Invariant: mu guards subs and each subscription's hits and all. A wait
// subscribes before it looks at the boundaries, so an announcement is
// either seen by its look or recorded for it; subscribed counts subs, so
// an announcement with no wait costs the commit path an atomic load.
type topicWatch struct {
	subscribed atomic.Int32
	mu         sync.Mutex
	subs       map[*waitSub]struct{}
}

// waitSub is one topic-wide wait's subscription: the partitions it
// waits on, those announced since it subscribed, and its wake-up.
type waitSub struct {
	positions map[int]int64
	wake      chan struct{} // buffered: one wake-up pending at most
	hits      []int
	all       bool // every partition is to be looked at again
}

func (w *topicWatch) subscribe(positions map[int]int64) *waitSub {
	sub := &waitSub{positions: positions, wake: make(chan struct{}, 1)}
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[*waitSub]struct{}{}
	}
	w.subs[sub] = struct{}{}
	w.subscribed.Add(1)
	w.mu.Unlock()
	return sub
}

func (w *topicWatch) unsubscribe(sub *waitSub) {
	w.mu.Lock()
	if _, ok := w.subs[sub]; ok {
		delete(w.subs, sub)
		w.subscribed.Add(-1)
	}
	w.mu.Unlock()
}

// take lists the partitions announced for sub since the last take, in
// order, or nil when every one is to be looked at again.
func (w *topicWatch) take(sub *waitSub) []int {
	w.mu.Lock()
	hits, all := sub.hits, sub.all
	sub.hits, sub.all = nil, false
	w.mu.Unlock()
	if all {
		return nil
	}
	if hits == nil {
		return []int{} // a wake-up whose announcement an earlier take had: nothing to look at
	}
	slices.Sort(hits)
	return slices.Compact(hits)
}

// announce records partition p's announcement for the waits on it (all
// of a topic's partitions with p AnyPartition) and wakes them.
func (w *topicWatch) announce(p int) {
	if w.subscribed.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for sub := range w.subs {
		if p == AnyPartition {
			sub.all = true
		} else if _, ok := sub.positions[p]; ok {
			sub.hits = append(sub.hits, p)
		} else {
			continue
		}
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}
