package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// MaxAckedAhead bounds a partition's acked-ahead set: an ack that would
// hold more offsets acked above the frontier is refused (the consumer must
// ack the frontier first). It keeps the set's memory, and the cost of
// writing it out, bounded; a slot stores only its lowest offsets anyway.
const MaxAckedAhead = 100000

// ErrAckedAheadFull: an ack would hold more than MaxAckedAhead offsets
// above the frontier.
var ErrAckedAheadFull = errors.New("runtime: too many offsets acked ahead of the frontier")

// ConsumerState is a partition's consumer progress: the frontier (the
// lowest offset not yet acked) and the offsets acked above it.
type ConsumerState struct {
	Frontier   int64
	AckedAhead []int64
	// HighWatermark, Lag (records committed and not acked) and Leased
	// (records leased to queue consumers, not settled) as of the call.
	HighWatermark, Lag int64
	Leased             int
}

// consumer is one partition's consumer progress and the files it persists
// to (docs/design.md, "Retention", the consumer-frontier paragraphs).
//
// Invariants, under mu:
//   - every offset in ahead is > frontier and < the high watermark it was
//     acked under; frontier never passes an unacked offset.
//   - anchor is the slot of consumer.ahead holding the newest record known
//     durable; it is never written while it is the anchor. Ticks write the
//     other slot, the window; a write-out syncs the window and flips them.
//   - levelled <= the frontier of the anchor: consumer.offset is levelled
//     only from a durable frontier, so after any crash a consumer.offset
//     above consumer.ahead's frontier is damage, not progress (R4).
//   - once dropped, nothing is ever written for it again.
type consumer struct {
	key         supervisor.Key
	log         *partition.Log // the log it was recovered for; settled when it closes
	dir         string
	incarnation wire.IncarnationID

	mu             sync.Mutex
	frontier       int64
	ahead          map[int64]struct{}
	dirty          bool      // acked since the last tick
	unsynced       bool      // the window holds, whole, a record written since the last write-out
	file           vfs.File  // consumer.ahead, held open once written
	anchor         int       // slot holding the durable record
	seq            uint64    // sequence of the last record written
	durable        int64     // frontier of the anchor record
	windowFrontier int64     // frontier of the record in the window
	levelled       int64     // what consumer.offset holds (or -1: nothing)
	levelAt        time.Time // last levelling
	ackedOnDisk    bool      // consumer.acked may exist (consumer_acked.go)
	ackedSeq       uint64    // the sequence consumer.acked holds the set of (0: none known)
	dropped        bool
}

// consumers is the node's consumer progress, by partition.
type consumers struct {
	n  *Node
	mu sync.Mutex
	by map[supervisor.Key]*consumer
}

// Ack records offsets as consumed (each below the high watermark) and
// returns the frontier. Acks below the frontier and duplicates are no-ops;
// the frontier moves past every offset acked in a row from it.
func (n *Node) Ack(ctx context.Context, topic string, p int, offsets ...int64) (int64, error) {
	for attempt := 0; ; attempt++ {
		c, hwm, err := n.consumerOf(ctx, topic, p)
		if err != nil {
			return 0, err
		}
		for _, o := range offsets {
			if o < 0 || o >= hwm {
				return 0, fmt.Errorf("%w: ack of offset %d, high watermark %d", partition.ErrBeyondHighWatermark, o, hwm)
			}
		}
		frontier, ok, err := n.ackInto(c, offsets)
		if err != nil {
			return 0, err
		}
		if ok {
			n.queues.settled(c.key, offsets)
			return frontier, nil
		}
		if attempt == 2 {
			return 0, fmt.Errorf("%w: %s/%d kept closing under an ack", partition.ErrLogClosed, topic, p)
		}
		// The progress was settled (its log closed) or dropped (its
		// incarnation deleted) under us: look it up afresh once.
	}
}

// ackInto applies acks to c; ok is false when c is no longer live.
func (n *Node) ackInto(c *consumer, offsets []int64) (frontier int64, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		return 0, false, nil
	}
	added := 0
	for _, o := range offsets {
		if _, dup := c.ahead[o]; o > c.frontier && !dup {
			added++
		}
	}
	if len(c.ahead)+added > MaxAckedAhead {
		return 0, false, fmt.Errorf("%w: %d held, %d more", ErrAckedAheadFull, len(c.ahead), added)
	}
	for _, o := range offsets {
		if o < c.frontier {
			continue
		}
		c.ahead[o] = struct{}{}
		c.dirty = true
	}
	for {
		if _, ok := c.ahead[c.frontier]; !ok {
			break
		}
		delete(c.ahead, c.frontier)
		c.frontier++
	}
	n.consumerMetrics.acks.Add(float64(len(offsets)))
	if c.dirty {
		n.committer.dirty(c)
	}
	return c.frontier, true, nil
}

// ConsumerState returns a partition's frontier and acked-ahead set,
// recovering them from disk on first touch.
func (n *Node) ConsumerState(ctx context.Context, topic string, p int) (ConsumerState, error) {
	for attempt := 0; ; attempt++ {
		c, _, err := n.consumerOf(ctx, topic, p)
		if err != nil {
			return ConsumerState{}, err
		}
		if st, ok := c.state(); ok {
			st.HighWatermark = c.log.HighWatermark()
			st.Lag = max(st.HighWatermark-st.Frontier-int64(len(st.AckedAhead)), 0)
			if q := n.queues.lookup(c.key); q != nil {
				q.mu.Lock()
				st.Leased = len(q.leased)
				q.mu.Unlock()
			}
			return st, nil
		}
		if attempt == 2 {
			return ConsumerState{}, fmt.Errorf("%w: %s/%d kept closing under a read of its consumer state", partition.ErrLogClosed, topic, p)
		}
	}
}

// frontierNow is c's frontier.
func (c *consumer) frontierNow() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frontier
}

// frontierIfLive is c's frontier; live is false once c was settled or
// dropped (acks go to its successor).
func (c *consumer) frontierIfLive() (frontier int64, live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frontier, !c.dropped
}

// acked reports whether offset o is acked: below the frontier or in the
// acked-ahead set.
func (c *consumer) acked(o int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ahead := c.ahead[o]
	return o < c.frontier || ahead
}

// skipRange settles [from, to) without acks: records nothing can deliver
// (damaged, or deleted by retention). From the frontier it moves the
// frontier; above it the range joins the acked-ahead set, within its
// bound (ErrAckedAheadFull past it). Written out like an ack. It returns
// how many of the offsets were not settled before.
func (c *consumer) skipRange(cm *committer, from, to int64) (settled int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		return 0, errConsumerGone
	}
	from = max(from, c.frontier)
	if to <= from {
		return 0, nil
	}
	settled = to - from
	for o := range c.ahead {
		if o >= from && o < to {
			settled--
		}
	}
	if from == c.frontier {
		c.frontier = to
	} else {
		if len(c.ahead)+int(settled) > MaxAckedAhead {
			return 0, fmt.Errorf("%w: %d held, %d more", ErrAckedAheadFull, len(c.ahead), settled)
		}
		for o := from; o < to; o++ {
			c.ahead[o] = struct{}{}
		}
	}
	for o := range c.ahead {
		if o < c.frontier {
			delete(c.ahead, o)
		}
	}
	for {
		if _, ok := c.ahead[c.frontier]; !ok {
			break
		}
		delete(c.ahead, c.frontier)
		c.frontier++
	}
	c.dirty = true
	cm.dirty(c)
	return settled, nil
}

// state copies c's progress; ok is false once c was settled or dropped.
func (c *consumer) state() (ConsumerState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		return ConsumerState{}, false
	}
	st := ConsumerState{Frontier: c.frontier, AckedAhead: make([]int64, 0, len(c.ahead))}
	for o := range c.ahead {
		st.AckedAhead = append(st.AckedAhead, o)
	}
	sort.Slice(st.AckedAhead, func(i, j int) bool { return st.AckedAhead[i] < st.AckedAhead[j] })
	return st, true
}

// consumerOf returns a partition's consumer progress and the high
// watermark of the log it belongs to, opening the log (acks are only ever
// below its high watermark) and recovering the progress lazily, under the
// topic's guard, on first touch: never from a metastore scan at boot. The
// progress is bound to the log it was recovered for and settled when that
// log closes; it is created only while that same log is still the open
// one and its directory still carries the record's incarnation, so a
// delete and recreate racing the first ack can never put one
// incarnation's progress into the other's directory.
func (n *Node) consumerOf(ctx context.Context, topic string, p int) (*consumer, int64, error) {
	key, err := n.key(topic, p)
	if err != nil {
		return nil, 0, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		l, err := n.log(ctx, key)
		if err != nil {
			return nil, 0, err
		}
		n.consumers.mu.Lock()
		c := n.consumers.by[key]
		n.consumers.mu.Unlock()
		if c != nil && c.log == l {
			return c, l.HighWatermark(), nil
		}
		var hwm int64
		stale := false
		err = n.withTopic(topic, func(t *supervisor.GuardedTopic) error {
			if cur, ok := t.Lookup(p); !ok || cur != l {
				stale = true // closed or replaced meanwhile: start over
				return nil
			}
			hwm = l.HighWatermark()
			n.consumers.mu.Lock()
			c = n.consumers.by[key]
			n.consumers.mu.Unlock()
			if c != nil && c.log == l {
				return nil
			}
			rec, ok, err := n.ms.Topic(ctx, topic)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
			}
			if rec.Incarnation != "" {
				marker, err := n.readMarker(filepath.Join(n.topicsDir, topic))
				if err != nil {
					return fmt.Errorf("consumer state of %s/%d: %w", topic, p, err)
				}
				if marker != rec.Incarnation {
					// The record moved on while this log is still open; the
					// recheck retires it. Nothing is recovered for it.
					return fmt.Errorf("%w: %s was deleted or recreated", ErrTopicNotFound, topic)
				}
			}
			dirName, _ := wire.PartitionDirName(p)
			c = &consumer{key: key, log: l, dir: filepath.Join(n.topicsDir, topic, dirName), incarnation: rec.Incarnation, ahead: map[int64]struct{}{}, levelled: -1}
			// Recovery holds c's lock: a repair's tick hands c to the
			// committer (its unsynced set), whose write-out must wait
			// until recovery is done with c, not flip its slots midway
			// (found by the campaign under the race detector).
			c.mu.Lock()
			rerr := n.recoverConsumer(c, hwm)
			c.mu.Unlock()
			if rerr != nil {
				return rerr
			}
			n.consumers.mu.Lock()
			n.consumers.by[key] = c
			n.consumers.mu.Unlock()
			return nil
		})
		if !stale {
			return c, hwm, busyError(err) // the progress's files met the open-file limit
		}
	}
	return nil, 0, fmt.Errorf("%w: %s/%d kept closing under an ack", partition.ErrLogClosed, topic, p)
}

// recoverConsumer reads consumer.ahead and consumer.offset. Of the ahead
// slots, the valid one of this incarnation with the larger sequence and a
// frontier not above the high watermark wins; consumer.offset is trusted
// only where it cannot skip an unacked record: not above the high
// watermark, and not above the ahead record's frontier when there is one
// (it is levelled only from a durable ahead frontier). What is rejected is
// logged and counted (docs/design.md R4, matrix rows 15 and 16).
func (n *Node) recoverConsumer(c *consumer, hwm int64) (err error) {
	files := n.cfg.FS
	aheadPath := filepath.Join(c.dir, wire.ConsumerAheadFileName)
	defer func() {
		if err == nil {
			return
		}
		// A repair that failed part-way handed c to the committer
		// already: dropped, it is left alone there (found by review: the
		// next write-out met its closed file).
		c.dropped = true
		if c.file != nil {
			c.file.Close()
			c.file = nil
		}
		n.committer.forget(c)
	}()
	var best *wire.AheadRecord
	var maxSeq uint64
	repair := false // a rejected record could win once the high watermark grows
	f, err := files.OpenFile(aheadPath, os.O_RDWR)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("consumer progress %s: %w", aheadPath, err)
	default:
		c.file = f
		// Whatever is read becomes the anchor: make it durable first, so a
		// window a dead process left in the page cache cannot be lost
		// under the record that takes it for durable; then drop the
		// cached pages, so what is read is what the media holds, not a
		// record whose write-out failed its fdatasync (a close's: the
		// kernel marked those pages clean unwritten, and this sync has
		// nothing left to write; docs/design.md R3, as for segments).
		if err := f.Sync(); err != nil {
			return fmt.Errorf("consumer progress %s: fsync: %w", aheadPath, err)
		}
		if err := f.DropCache(); err != nil {
			return fmt.Errorf("consumer progress %s: drop cached pages: %w", aheadPath, err)
		}
		for slot := range 2 {
			buf := make([]byte, wire.AheadSlotSize)
			if _, err := f.ReadAt(buf, wire.AheadSlotOffset(slot)); err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("consumer progress %s: %w", aheadPath, err)
			}
			rec, err := wire.DecodeAheadSlot(buf)
			switch {
			case err != nil:
				if buf[0] != 0 { // an all-zero slot was never written
					n.consumerMetrics.slotDecodeFailures.Inc()
					n.logger.Warn("consumer.ahead slot rejected", zap.String("path", aheadPath), zap.Int("slot", slot), zap.Error(err))
				}
				continue
			case rec.Incarnation != c.incarnation:
				n.consumerMetrics.slotDecodeFailures.Inc()
				n.logger.Warn("consumer.ahead slot of another incarnation rejected", zap.String("path", aheadPath), zap.Int("slot", slot))
				continue
			}
			maxSeq = max(maxSeq, rec.Sequence)
			if rec.Frontier > hwm {
				n.consumerMetrics.frontierRejected.Inc()
				n.logger.Warn("consumer.ahead frontier above the high watermark rejected", zap.String("path", aheadPath), zap.Int64("frontier", rec.Frontier), zap.Int64("hwm", hwm))
				repair = true
				continue
			}
			if best == nil || rec.Sequence > best.Sequence {
				best, c.anchor = &rec, slot
			}
		}
	}
	offset := int64(-1)
	b, err := vfs.ReadFile(files, filepath.Join(c.dir, wire.ConsumerOffsetFileName), 64)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil && !errors.Is(err, vfs.ErrFileTooLarge):
		return fmt.Errorf("consumer progress %s: %w", c.dir, err)
	default:
		v, present, derr := wire.DecodeOffsetFile(b)
		switch {
		case err != nil || derr != nil:
			n.consumerMetrics.frontierRejected.Inc()
			n.logger.Warn("consumer.offset rejected: not an 8-byte offset", zap.String("dir", c.dir))
			repair = true
		case !present:
		case v > hwm || (best != nil && v > best.Frontier):
			n.consumerMetrics.frontierRejected.Inc()
			n.logger.Warn("consumer.offset rejected: it would skip unacked records",
				zap.String("dir", c.dir), zap.Int64("offset", v), zap.Int64("hwm", hwm))
			repair = true
		default:
			offset = v
		}
	}
	if best != nil {
		c.frontier, c.seq, c.durable = best.Frontier, best.Sequence, best.Frontier
		for _, o := range best.Ahead {
			if o < hwm {
				c.ahead[o] = struct{}{}
			}
		}
	}
	if offset > c.frontier { // no ahead record survived: the larger wins
		c.frontier, c.durable = offset, offset
	}
	c.levelled = offset
	if err := n.mergeAcked(c, hwm); err != nil {
		return err
	}
	if repair {
		return n.committer.repairLocked(c, maxSeq)
	}
	return nil
}

// drop forgets a deleted incarnation's consumer progress, right after the
// quarantine rename or purge and before any fresh directory exists: its
// held file is closed and nothing is written for it again.
func (cs *consumers) drop(topic string, id wire.IncarnationID) {
	cs.mu.Lock()
	var gone []*consumer
	for k, c := range cs.by {
		if k.Topic == topic { // every one: each belongs to the directory going away
			gone = append(gone, c)
			delete(cs.by, k)
		}
	}
	cs.mu.Unlock()
	sort.Slice(gone, func(i, j int) bool { return gone[i].key.Partition < gone[j].key.Partition }) // one topic: closes in a fixed order
	for _, c := range gone {
		c.mu.Lock()
		c.dropped = true
		if c.file != nil {
			c.file.Close()
			c.file = nil
		}
		c.mu.Unlock()
	}
}

// settle writes a partition's progress out (consumer.ahead synced and
// consumer.offset levelled) and closes its file: at the close of its log.
func (cs *consumers) settle(key supervisor.Key) {
	cs.mu.Lock()
	c := cs.by[key]
	delete(cs.by, key)
	cs.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		return
	}
	err := cs.n.committer.writeOutLocked(c, true)
	if err == nil {
		err = cs.n.committer.writeAckedLocked(c)
	}
	if err != nil {
		cs.n.logger.Warn("consumer progress at close", zap.String("dir", c.dir), zap.Error(err))
		// The progress recovered next may hold fewer acks: the queue's
		// next lease checks it, whatever progress it leased against
		// (the acks may have gone to progress it never met).
		if q := cs.n.queues.lookup(key); q != nil {
			q.recheck.Store(true)
		}
	}
	c.dropped = true // a later touch recovers afresh from the files
	if c.file != nil {
		c.file.Close()
		c.file = nil
	}
}
