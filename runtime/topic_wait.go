package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// A topic-wide wait (WaitTopic) is how a reader of many partitions waits
// for records without a long poll per partition: one call names a
// position in each partition it reads, and returns as soon as any of them
// has a high watermark elsewhere. It never opens a log (docs/http-api.md,
// "Wait for records across a topic"; docs/design.md, "Wake-ups for
// waiting readers").

// UnknownHighWatermark is a ready partition's high watermark when the
// node does not know it without an open (a boundary a crash left
// unwritten, or one it could not read): a fetch at the position opens the
// partition, or meets its error.
const UnknownHighWatermark = -1

// TopicWaitReady is a partition a topic-wide wait found ready: its high
// watermark is not the position the wait named (records past it, or a
// boundary that moved back, which a fetch at the position then reports),
// or is UnknownHighWatermark.
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
// partition -> the offset the reader is at; at least one) has a high
// watermark other than that offset, and answers every such partition;
// or, when ctx ends first, answers none (no error). Partitions another
// node owns are answered at once in NotHere, without waiting. The wait
// is on the incarnation the topic has when it starts (inc, when given,
// must be it): a delete of the topic during the wait, or a record of
// another incarnation, answers ErrTopicNotFound; a partition past the
// topic's, ErrPartitionNotFound. A commit, a close, a change of the
// topic's record or assignments (the metastore's feed), the topic's
// deletion and the node's Close wake it: it never polls, and it opens no
// log.
func (n *Node) WaitTopic(ctx context.Context, topic string, inc wire.IncarnationID, positions map[int]int64) (TopicWait, error) {
	if err := wire.ValidateTopicName(topic); err != nil {
		return TopicWait{}, err
	}
	if len(positions) == 0 {
		return TopicWait{}, errors.New("runtime: a topic-wide wait names no partition")
	}
	positions = maps.Clone(positions) // the watch reads it while the caller may not
	every := slices.Sorted(maps.Keys(positions))
	rec, err := n.waitRecord(ctx, topic, inc)
	if err != nil {
		return TopicWait{}, err
	}
	inc = rec.Incarnation
	// Subscribed before each look, so an announcement during it is either
	// seen by it or recorded for the next.
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
		if look = w.take(sub); look == nil {
			// A change of the topic, its deletion or Close: every
			// partition again, from the topic's current watch (a
			// directory replaced under the same record gets a new one).
			if _, err := n.waitRecord(ctx, topic, inc); err != nil {
				return TopicWait{}, err
			}
			if now := n.watches.of(topic); now != w {
				w.unsubscribe(sub)
				w, sub = now, now.subscribe(positions)
			}
			look = every
		}
	}
}

// waitRecord is topic's record, which must be incarnation inc when one
// is given.
func (n *Node) waitRecord(ctx context.Context, topic string, inc wire.IncarnationID) (TopicRecord, error) {
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return rec, err
	}
	if !ok || (inc != "" && rec.Incarnation != inc) {
		return rec, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	return rec, nil
}

// checkTopicWait is one look at the partitions parts of a topic-wide
// wait on incarnation inc.
func (n *Node) checkTopicWait(ctx context.Context, topic string, inc wire.IncarnationID, parts []int, positions map[int]int64) (TopicWait, error) {
	rec, err := n.waitRecord(ctx, topic, inc)
	if err != nil {
		return TopicWait{}, err
	}
	out := TopicWait{Incarnation: rec.Incarnation}
	var unknown []int
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
		hwm, ok := n.marks.highWatermark(supervisor.Key{Topic: topic, Partition: p}, rec.Incarnation)
		if !ok {
			unknown = append(unknown, p)
			continue
		}
		if hwm != positions[p] {
			out.Ready = append(out.Ready, TopicWaitReady{Partition: p, HighWatermark: hwm})
		}
	}
	if len(unknown) > 0 {
		for _, r := range n.learnBoundaries(topic, rec.Incarnation, unknown) {
			if r.HighWatermark != positions[r.Partition] {
				out.Ready = append(out.Ready, r)
			}
		}
		slices.SortFunc(out.Ready, func(a, b TopicWaitReady) int { return a.Partition - b.Partition })
	}
	return out, nil
}

// learnBoundaries reads the boundaries of closed partitions the node has
// no mark of (a topic made since the start, one whose startup check
// failed) the way the startup check does, under the topic's guard, and
// keeps each exact one as the partition's mark, so the next look needs no
// read. One it cannot learn without an open is UnknownHighWatermark.
func (n *Node) learnBoundaries(topic string, id wire.IncarnationID, parts []int) []TopicWaitReady {
	out := make([]TopicWaitReady, 0, len(parts))
	topicDir := filepath.Join(n.topicsDir, topic)
	err := n.withTopic(topic, func(t *supervisor.GuardedTopic) error {
		if marker, err := n.readMarker(topicDir); err == nil && marker != id || err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the directory is not incarnation %s's (%v)", id, err) // the open's check decides it
		}
		for _, p := range parts {
			key := supervisor.Key{Topic: topic, Partition: p}
			if l, open := t.Lookup(p); open {
				out = append(out, TopicWaitReady{Partition: p, HighWatermark: l.HighWatermark()})
				continue
			}
			dirName, _ := wire.PartitionDirName(p)
			b, err := readBoundary(n.cfg.FS, filepath.Join(topicDir, dirName))
			if err != nil || !b.exact {
				out = append(out, TopicWaitReady{Partition: p, HighWatermark: UnknownHighWatermark})
				continue
			}
			n.marks.seed(key, id, b.hwm) // under the guard: no close or open of it meanwhile
			out = append(out, TopicWaitReady{Partition: p, HighWatermark: b.hwm})
		}
		return nil
	})
	if err != nil {
		n.logger.Warn("topic-wide wait: boundaries unknown without an open", zap.String("topic", topic), zap.Error(err))
		out = out[:0]
		for _, p := range parts {
			out = append(out, TopicWaitReady{Partition: p, HighWatermark: UnknownHighWatermark})
		}
	}
	return out
}

// topicWatches are the node's topic-wide waits' wake-ups, one per topic
// that has had a wait or an open log since its incarnation began.
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

// wake has topic's waits look at every partition again (its record or
// assignments changed), if it has a watch.
func (ws *topicWatches) wake(topic string) {
	ws.mu.Lock()
	w := ws.by[topic]
	ws.mu.Unlock()
	if w != nil {
		w.announce(AnyPartition)
	}
}

// drop ends topic's watch (its incarnation is gone): its waits find so,
// a wait that subscribes to it after is woken at once, and a new
// incarnation's logs and waits get a new one.
func (ws *topicWatches) drop(topic string) {
	ws.mu.Lock()
	w := ws.by[topic]
	delete(ws.by, topic)
	ws.mu.Unlock()
	if w != nil {
		w.end()
	}
}

// wakeAll ends every watch: the node is closing.
func (ws *topicWatches) wakeAll() {
	ws.mu.Lock()
	all := slices.Collect(maps.Values(ws.by))
	ws.mu.Unlock()
	for _, w := range all {
		w.end()
	}
}

// topicWatch is one topic's announcements to its topic-wide waits, made
// at every announcement of any of its logs (a commit, a close).
//
// Invariant: mu guards subs, ended, and each subscription's hits and all.
// A wait subscribes before it looks at the boundaries, so an
// announcement is either seen by its look or recorded for it; subscribed
// counts subs, so an announcement with no wait costs the commit path an
// atomic load, and one with waits a pass over them (a topic has few).
// Once ended, every subscription, present or to come, is to look at
// everything. mu is a leaf: nothing holding it calls out.
type topicWatch struct {
	subscribed atomic.Int32
	mu         sync.Mutex
	subs       map[*waitSub]struct{}
	ended      bool
}

// waitSub is one topic-wide wait's subscription: the partitions it
// waits on, those announced since its last take (each once: at most the
// partitions waited on), and its wake-up.
type waitSub struct {
	positions map[int]int64
	wake      chan struct{} // buffered: one wake-up pending at most
	hits      map[int]struct{}
	all       bool // every partition is to be looked at again
}

func (w *topicWatch) subscribe(positions map[int]int64) *waitSub {
	sub := &waitSub{positions: positions, wake: make(chan struct{}, 1), hits: map[int]struct{}{}}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs == nil {
		w.subs = map[*waitSub]struct{}{}
	}
	w.subs[sub] = struct{}{}
	w.subscribed.Add(1)
	if w.ended {
		sub.note(AnyPartition)
	}
	return sub
}

func (w *topicWatch) unsubscribe(sub *waitSub) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.subs[sub]; ok {
		delete(w.subs, sub)
		w.subscribed.Add(-1)
	}
}

// take lists the partitions announced for sub since the last take, in
// order, or nil when every one is to be looked at again.
func (w *topicWatch) take(sub *waitSub) []int {
	w.mu.Lock()
	hits, all := sub.hits, sub.all
	sub.hits, sub.all = map[int]struct{}{}, false
	w.mu.Unlock()
	if all {
		return nil
	}
	if len(hits) == 0 {
		return []int{} // a wake-up an earlier take had: nothing to look at (nil would be everything)
	}
	return slices.Sorted(maps.Keys(hits))
}

// announce records partition p's announcement for the waits on it (all
// partitions with AnyPartition) and wakes them.
func (w *topicWatch) announce(p int) {
	if w.subscribed.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for sub := range w.subs {
		sub.note(p)
	}
}

// end announces every partition to the watch's waits, now and to come.
func (w *topicWatch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	for sub := range w.subs {
		sub.note(AnyPartition)
	}
}

// note records p for sub and wakes it, if sub waits on p; its watch's mu
// is held.
func (sub *waitSub) note(p int) {
	switch _, mine := sub.positions[p]; {
	case p == AnyPartition:
		sub.all, sub.hits = true, map[int]struct{}{}
	case mine:
		sub.hits[p] = struct{}{}
	default:
		return
	}
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}
