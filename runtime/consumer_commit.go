package runtime

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// levelInterval is how often consumer.offset is brought level with the
// durable frontier while the node runs (and at every close).
const levelInterval = 30 * time.Second

// committer persists acks at the design's two cadences: every tick, each
// partition acked since the last tick has its consumer.ahead record
// written into the page cache through a held descriptor; once per commit
// interval each partition written since is written out (fdatasync), one
// partition at a time. A partition with no acks costs nothing: only the
// dirty and unsynced sets are walked.
type committer struct {
	n              *Node
	commitInterval time.Duration

	mu           sync.Mutex
	dirtySet     map[*consumer]struct{}
	unsyncedSet  map[*consumer]struct{}
	lastWriteOut time.Time
}

type consumerMetrics struct {
	acks               prometheus.Counter
	writeOuts          prometheus.Counter
	writeOutSeconds    prometheus.Histogram
	slotDecodeFailures prometheus.Counter
	frontierRejected   prometheus.Counter
	corruptSkipped     prometheus.Counter
	leaseExpirations   prometheus.Counter
	redeliveries       prometheus.Counter
}

func newConsumerMetrics(reg prometheus.Registerer) consumerMetrics {
	m := consumerMetrics{
		acks:      prometheus.NewCounter(prometheus.CounterOpts{Name: "narad_consumer_acks_total", Help: "Offsets acked."}),
		writeOuts: prometheus.NewCounter(prometheus.CounterOpts{Name: "narad_consumer_writeouts_total", Help: "consumer.ahead write-outs (fdatasync)."}),
		writeOutSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "narad_consumer_writeout_seconds",
			Help: "Latency of one partition's consumer.ahead write-out.", Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16)}),
		slotDecodeFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "narad_consumer_slot_decode_failures_total", Help: "consumer.ahead slots rejected at recovery."}),
		frontierRejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "narad_consumer_frontier_rejected_total",
			Help: "Recovered frontiers rejected: above the high watermark, or a consumer.offset above consumer.ahead's."}),
		corruptSkipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "narad_consumer_corrupt_skipped_total",
			Help: "Records in damaged frames a queue consume settled without delivering them."}),
		leaseExpirations: prometheus.NewCounter(prometheus.CounterOpts{Name: "narad_consumer_lease_expirations_total",
			Help: "Queue leases that ran out unacked, giving their record back for redelivery."}),
		redeliveries: prometheus.NewCounter(prometheus.CounterOpts{Name: "narad_consumer_redeliveries_total",
			Help: "Records a queue consume leased again after a nack or an expired lease."}),
	}
	m.acks = promshare.Register(reg, m.acks)
	m.writeOuts = promshare.Register(reg, m.writeOuts)
	m.writeOutSeconds = promshare.Register(reg, m.writeOutSeconds)
	m.slotDecodeFailures = promshare.Register(reg, m.slotDecodeFailures)
	m.frontierRejected = promshare.Register(reg, m.frontierRejected)
	m.corruptSkipped = promshare.Register(reg, m.corruptSkipped)
	m.leaseExpirations = promshare.Register(reg, m.leaseExpirations)
	m.redeliveries = promshare.Register(reg, m.redeliveries)
	return m
}

// startConsumerCommitter starts the committer loop: a tick every 100 ms,
// or every commit interval if that is shorter.
func (n *Node) startConsumerCommitter() {
	tick := min(100*time.Millisecond, n.cfg.ConsumerOffsetCommitInterval)
	n.loops = append(n.loops, supervisor.StartLoop(supervisor.LoopConfig{
		Name: "consumer_committer", Interval: tick, StallAfter: max(time.Minute, 100*tick),
		MaxRestarts: 10, Logger: n.logger, Registerer: n.promReg,
	}, n.committer.pass))
}

func (cm *committer) dirty(c *consumer) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	cm.dirtySet[c] = struct{}{}
}

// pass is one tick of the committer loop: every dirty partition's record
// into the page cache, then, once per commit interval, the write-out.
func (cm *committer) pass(_ context.Context, p *supervisor.PassContext) {
	cm.tickAll(p.Item)
	cm.mu.Lock()
	due := time.Since(cm.lastWriteOut) >= cm.commitInterval
	if due {
		cm.lastWriteOut = time.Now()
	}
	cm.mu.Unlock()
	if due {
		cm.writeOutAll(p.Item)
	}
}

// tickAll writes the record of every partition acked since the last tick
// into its window slot. item runs each partition's work, containing a
// panic to that partition.
func (cm *committer) tickAll(item func(string, func())) {
	cm.mu.Lock()
	dirty := cm.dirtySet
	cm.dirtySet = map[*consumer]struct{}{}
	cm.mu.Unlock()
	for _, c := range inOrder(dirty) {
		item(itemName(c), func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if err := cm.tickLocked(c); err != nil {
				cm.n.logger.Warn("consumer.ahead tick", zap.String("dir", c.dir), zap.Error(err))
				c.dirty = true
				cm.dirty(c)
			}
		})
	}
}

// writeOutAll writes out every partition written since the last write-out,
// one partition at a time.
func (cm *committer) writeOutAll(item func(string, func())) {
	cm.mu.Lock()
	unsynced := cm.unsyncedSet
	cm.unsyncedSet = map[*consumer]struct{}{}
	cm.mu.Unlock()
	for _, c := range inOrder(unsynced) {
		item(itemName(c), func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if err := cm.writeOutLocked(c, false); err != nil {
				cm.n.logger.Warn("consumer.ahead write-out", zap.String("dir", c.dir), zap.Error(err))
			}
		})
	}
}

// inOrder lists a set of consumers by topic and partition: a pass makes
// its file calls in the same order every time, so a simulated run
// replays them exactly.
func inOrder(set map[*consumer]struct{}) []*consumer {
	out := slices.Collect(maps.Keys(set))
	slices.SortFunc(out, func(a, b *consumer) int {
		return cmp.Or(strings.Compare(a.key.Topic, b.key.Topic), cmp.Compare(a.key.Partition, b.key.Partition))
	})
	return out
}

func itemName(c *consumer) string { return fmt.Sprintf("%s/%d", c.key.Topic, c.key.Partition) }

// tickLocked writes c's record into the window slot, through the page
// cache. The anchor slot is never touched.
func (cm *committer) tickLocked(c *consumer) error {
	if c.dropped || !c.dirty {
		return nil
	}
	if c.file == nil {
		path := filepath.Join(c.dir, wire.ConsumerAheadFileName)
		f, err := cm.n.cfg.FS.OpenFile(path, os.O_RDWR|os.O_CREATE)
		if err != nil {
			return err
		}
		if err := cm.n.cfg.FS.SyncDir(c.dir); err != nil { // docs/design.md R7
			f.Close()
			return err
		}
		c.file = f
	}
	var slot [wire.AheadSlotSize]byte
	rec := wire.AheadRecord{Sequence: c.seq + 1, Incarnation: c.incarnation, Frontier: c.frontier, Ahead: c.sortedAhead()}
	if _, err := wire.EncodeAheadSlot(&slot, rec); err != nil {
		return err
	}
	window := 1 - c.anchor
	if _, err := c.file.WriteAt(slot[:], wire.AheadSlotOffset(window)); err != nil {
		// Part of it may have landed: the window no longer holds the
		// record an earlier tick wrote, and no write-out may flip it into
		// the anchor until a tick writes it whole again.
		c.unsynced = false
		return err
	}
	c.seq++
	c.dirty = false
	c.unsynced = true
	c.windowFrontier = c.frontier
	cm.mu.Lock()
	cm.unsyncedSet[c] = struct{}{}
	cm.mu.Unlock()
	return nil
}

// writeOutLocked makes the window durable and flips it into the anchor,
// then levels consumer.offset when due (or when closing). A failed sync
// flips nothing: the window is written afresh at the next tick and synced
// at the next write-out, never trusted on the strength of a retried sync;
// nor is a window whose last write failed (tickLocked).
func (cm *committer) writeOutLocked(c *consumer, closing bool) error {
	if c.dropped {
		return nil
	}
	if closing && c.dirty {
		if err := cm.tickLocked(c); err != nil {
			return err
		}
	}
	if c.unsynced {
		started := time.Now()
		if err := c.file.Sync(); err != nil {
			c.dirty = true
			cm.dirty(c)
			return fmt.Errorf("consumer.ahead fdatasync: %w", err)
		}
		cm.n.consumerMetrics.writeOutSeconds.Observe(time.Since(started).Seconds())
		cm.n.consumerMetrics.writeOuts.Inc()
		c.anchor = 1 - c.anchor
		c.durable = c.windowFrontier
		c.unsynced = false
	}
	if c.durable != c.levelled && (closing || time.Since(c.levelAt) >= levelInterval) {
		if err := cm.level(c); err != nil {
			return err
		}
	}
	return nil
}

// repairLocked overwrites what recovery rejected, durably, before the
// progress is served: both consumer.ahead slots get the recovered record
// (with sequences above any on disk) and consumer.offset the recovered
// frontier. Left in place, a rejected record (a frontier above the high
// watermark, or a raised consumer.offset) would win at a later recovery,
// once the high watermark had grown past it, and skip unacked records.
// The window is synced before the anchor's slot is written, so a crash
// between the two writes never finds both slots torn.
func (cm *committer) repairLocked(c *consumer, maxSeq uint64) error {
	c.seq = max(c.seq, maxSeq)
	c.dirty = true
	if err := cm.tickLocked(c); err != nil {
		return fmt.Errorf("consumer progress repair: %w", err)
	}
	if err := c.file.Sync(); err != nil {
		return fmt.Errorf("consumer progress repair: fdatasync: %w", err)
	}
	c.dirty = true
	c.anchor = 1 - c.anchor // write the other slot too
	if err := cm.tickLocked(c); err != nil {
		return fmt.Errorf("consumer progress repair: %w", err)
	}
	if err := c.file.Sync(); err != nil {
		return fmt.Errorf("consumer progress repair: fdatasync: %w", err)
	}
	cm.mu.Lock()
	delete(cm.unsyncedSet, c)
	cm.mu.Unlock()
	c.anchor, c.unsynced, c.durable = 1-c.anchor, false, c.frontier
	return cm.level(c)
}

// forget takes c out of the committer's sets (a consumer recovery gave up
// on).
func (cm *committer) forget(c *consumer) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	delete(cm.dirtySet, c)
	delete(cm.unsyncedSet, c)
}

// level writes the durable frontier into consumer.offset: 8 bytes in
// place, one sector, fdatasynced, the file cut to 8 bytes should it be
// longer; the directory synced when created.
func (cm *committer) level(c *consumer) error {
	path := filepath.Join(c.dir, wire.ConsumerOffsetFileName)
	content, err := wire.EncodeOffsetFile(c.durable)
	if err != nil {
		return err
	}
	f, err := cm.n.cfg.FS.OpenFile(path, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(content[:], 0); err != nil {
		return err
	}
	if err := f.Truncate(wire.OffsetFileSize); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if c.levelled < 0 {
		if err := cm.n.cfg.FS.SyncDir(c.dir); err != nil {
			return err
		}
	}
	c.levelled, c.levelAt = c.durable, time.Now()
	return nil
}
