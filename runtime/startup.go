package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	goruntime "runtime"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Start settles every partition this node owns before it reports ready,
// and opens as many as the open-log budget holds (runtime/doc.go, its
// Startup bullet, and "Startup check and recovery" for the crash
// argument): each one's boundary file is read without opening its log;
// one whose boundary is not exact (a crash left it empty, or a torn
// write) is opened and closed again, in parallel across topics and
// partitions, so its boundary is on disk (docs/design.md, "High
// watermark and hidden tail"); then the budget's worth are opened and
// left open, the recovered ones first (every one with no budget, or with
// the cold walk off, as nothing else would sweep a partition left
// closed). The rest stay closed, their boundaries exact on disk, and open
// on first use as after idle eviction. A partition whose assignment
// lookup, recovery or open fails is warned of and skipped. Progress is
// logged. Before, it reclaims quarantined directories whose incarnation
// the metastore confirms gone; after, it follows the metastore's change
// feed.
func (n *Node) Start(ctx context.Context) error {
	unsubscribe := n.ms.Subscribe(func(topic string) {
		n.lifecycle.Lock() // so no recheck starts once Close waits for them
		defer n.lifecycle.Unlock()
		if n.closed.Load() {
			return
		}
		n.background.Add(1)
		go func() {
			defer n.background.Done()
			n.recheck(topic)
		}()
	})
	n.lifecycle.Lock()
	if n.closed.Load() {
		n.lifecycle.Unlock()
		unsubscribe()
		return ErrNodeClosed
	}
	n.unsubscribe = unsubscribe
	n.lifecycle.Unlock()
	n.SweepQuarantine(ctx)
	topics, err := n.ms.Topics(ctx)
	if err != nil {
		return fmt.Errorf("runtime: startup: list topics: %w", err)
	}
	total := 0
	owned := make(map[string][]int, len(topics))
	for _, t := range topics {
		for p := range t.Partitions {
			// A cluster's node settles only what it owns; a lookup that
			// fails is the pass's to report.
			if mine, err := n.ms.Assigned(ctx, t.Name, p); err != nil || mine {
				owned[t.Name] = append(owned[t.Name], p)
			}
		}
		total += len(owned[t.Name])
		n.topicMetrics.add(t.Name)
	}
	prog := &startupProgress{n: n, total: total, started: time.Now()}
	settled, err := n.settleAtStartup(ctx, topics, owned, prog)
	if err != nil {
		return err
	}
	if err := n.openAtStartup(ctx, topics, n.startupOpens(topics, owned, settled), prog); err != nil {
		return err
	}
	prog.log()
	n.lifecycle.Lock()
	defer n.lifecycle.Unlock()
	if n.closed.Load() {
		return ErrNodeClosed // Close ran meanwhile: start nothing it would not stop
	}
	n.startLoops()
	n.startConsumerCommitter()
	n.ready.Store(true)
	return nil
}

// startupProgress counts what Start did and logs it every 5 seconds and
// at the end: partitions checked (their boundary exact on disk, found or
// written), recovered (opened to write it), opened (left open) and
// skipped (failed, warned of).
type startupProgress struct {
	n                                   *Node
	total                               int
	started                             time.Time
	lastLog                             atomic.Int64
	checked, recovered, opened, skipped atomic.Int64
}

func (p *startupProgress) settled(recovered bool) {
	if recovered {
		p.recovered.Add(1)
	}
	p.checked.Add(1)
	p.tick()
}

func (p *startupProgress) skip(key supervisor.Key, err error) {
	p.skipped.Add(1)
	p.n.logger.Warn("startup: skipping a partition that failed to open",
		zap.String("topic", key.Topic), zap.Int("partition", key.Partition), zap.Error(err))
}

func (p *startupProgress) tick() {
	if now, last := time.Now().UnixNano(), p.lastLog.Load(); now-last > int64(5*time.Second) && p.lastLog.CompareAndSwap(last, now) {
		p.log()
	}
}

func (p *startupProgress) log() {
	p.n.logger.Info("startup: opening partitions",
		zap.Int64("checked", p.checked.Load()), zap.Int64("recovered", p.recovered.Load()),
		zap.Int64("opened", p.opened.Load()), zap.Int64("skipped", p.skipped.Load()),
		zap.Int("total", p.total), zap.Int("open_now", p.n.reg.Len()),
		zap.Int("open_limit", p.n.reg.MaxOpen()), zap.Duration("elapsed", time.Since(p.started)))
}

// startupOpens lists, by topic, the partitions Start opens and leaves
// open once every boundary is settled: with an open-log budget and the
// cold walk on, as many as the budget holds, the ones the pass recovered
// first (the partitions in use when the node went down), then the others
// in order; otherwise every one (past a budget each open closes the
// least recently used log, and one retention still has work in stays
// open for the reaper, as before). Skipped partitions are left out; one
// whose recovery could not write its boundary is always in, first.
func (n *Node) startupOpens(topics []TopicRecord, owned map[string][]int, settled *startupSettled) map[string][]int {
	room := -1 // every one
	if limit := n.reg.MaxOpen(); limit > 0 && n.cfg.ColdWalkInterval > 0 {
		room = limit
	}
	picked := map[supervisor.Key]bool{}
	out := map[string][]int{}
	add := func(key supervisor.Key) {
		if len(picked) == room || picked[key] || settled.skipped[key] {
			return
		}
		picked[key] = true
		out[key.Topic] = append(out[key.Topic], key.Partition)
	}
	for _, key := range settled.unwritten { // whatever the room: no boundary on disk
		picked[key] = true
		out[key.Topic] = append(out[key.Topic], key.Partition)
	}
	if room >= 0 {
		room = max(room, len(picked))
	}
	for _, key := range settled.recovered {
		add(key)
	}
	for _, t := range topics {
		for _, p := range owned[t.Name] {
			add(supervisor.Key{Topic: t.Name, Partition: p})
		}
	}
	return out
}

// openAtStartup opens the partitions of opens through the registry and
// leaves them open: a topic's one after another (its opens take its
// guard), up to min(8, GOMAXPROCS) topics at once.
func (n *Node) openAtStartup(ctx context.Context, topics []TopicRecord, opens map[string][]int, prog *startupProgress) error {
	var g errgroup.Group
	workers := min(8, goruntime.GOMAXPROCS(0))
	if limit := n.reg.MaxOpen(); limit > 0 {
		// Each worker holds a log open (and its topic's guard, which
		// keeps the topic's logs from other workers' evictions) while it
		// opens: leave room for every worker to find an idle log.
		workers = max(1, min(workers, limit/4))
	}
	if n.serial() {
		workers = 1
	}
	g.SetLimit(workers)
	for _, t := range topics {
		parts := opens[t.Name]
		if len(parts) == 0 {
			continue
		}
		g.Go(func() error {
			for _, p := range parts {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := n.openOneAtStartup(ctx, t.Name, p); err != nil {
					if errors.Is(err, ErrNodeClosed) {
						return err // Close ran meanwhile: nothing more to open
					}
					prog.skip(supervisor.Key{Topic: t.Name, Partition: p}, err)
					continue
				}
				prog.opened.Add(1)
				prog.tick()
			}
			return nil
		})
	}
	return g.Wait()
}

// startupBusyRetries bounds how often startup retries an open that found
// every log of the budget in use (other topics' opens hold their guards
// for a moment), startupBusyPause apart, before it skips the partition.
const (
	startupBusyRetries = 100
	startupBusyPause   = 10 * time.Millisecond
)

// openOneAtStartup opens one partition, retrying while the open-log
// budget has no idle log to close. Past the budget (the cold walk off),
// each open closes the least recently used log, and the most recently
// opened ones stay open.
func (n *Node) openOneAtStartup(ctx context.Context, topic string, p int) error {
	for try := 0; ; try++ {
		_, err := n.Log(ctx, topic, p)
		if !errors.Is(err, ErrBusy) || try == startupBusyRetries {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(startupBusyPause):
		}
	}
}

// startLoops starts the node's own supervised loops: idle eviction, the
// periodic quarantine sweep, the cursor writer (moved cursor positions
// written out), the reaper and the cold walk (retention.go).
func (n *Node) startLoops() {
	n.loops = append(n.loops,
		supervisor.StartLoop(supervisor.LoopConfig{
			Name: "idle_eviction", Interval: n.cfg.EvictInterval, StallAfter: 10 * n.cfg.EvictInterval,
			MaxRestarts: 10, Logger: n.logger, Registerer: n.promReg,
		}, func(context.Context, *supervisor.PassContext) { n.EvictIdle(time.Now()) }),
		supervisor.StartLoop(supervisor.LoopConfig{
			Name: "quarantine_sweep", Interval: n.cfg.QuarantineSweepInterval, StallAfter: 10 * n.cfg.QuarantineSweepInterval,
			MaxRestarts: 10, Logger: n.logger, Registerer: n.promReg,
		}, func(ctx context.Context, _ *supervisor.PassContext) { n.SweepQuarantine(ctx) }),
		supervisor.StartLoop(supervisor.LoopConfig{
			Name: "cursor_writer", Interval: n.cfg.ConsumerOffsetCommitInterval, StallAfter: max(time.Minute, 100*n.cfg.ConsumerOffsetCommitInterval),
			MaxRestarts: 10, Logger: n.logger, Registerer: n.promReg,
		}, func(context.Context, *supervisor.PassContext) { n.cursors.writeOutAll() }),
	)
	n.loops = append(n.loops, n.startRetentionLoops()...)
	n.loops = append(n.loops, n.startScrub()...)
}

// SweepQuarantine reclaims quarantined directories (topics/<name>.stale-<id>)
// once the metastore confirms their incarnation is gone, and purges a
// topic directory no record names whose marker's incarnation the
// metastore confirms gone: a delete whose purge never ran (the node closed
// or crashed between the record's removal and the purge). It returns how
// many it removed.
func (n *Node) SweepQuarantine(ctx context.Context) int {
	entries, err := n.cfg.FS.ReadDir(n.topicsDir)
	if err != nil {
		n.logger.Warn("quarantine sweep: list topics", zap.Error(err))
		return 0
	}
	removed := 0
	for _, e := range entries {
		if e.IsDir && wire.ValidateTopicName(e.Name) == nil {
			if n.purgeOrphan(ctx, e.Name) {
				removed++
			}
			continue
		}
		name, id, ok := wire.ParseStaleDirName(e.Name)
		if !ok || !e.IsDir {
			continue
		}
		gone, err := n.ms.IncarnationGone(ctx, name, id)
		if err != nil || !gone {
			continue
		}
		err = n.withTopic(name, func(*supervisor.GuardedTopic) error {
			if err := n.cfg.FS.RemoveAll(filepath.Join(n.topicsDir, e.Name)); err != nil {
				return err
			}
			return n.cfg.FS.SyncDir(n.topicsDir)
		})
		if err != nil {
			n.logger.Warn("quarantine sweep: reclaim", zap.String("dir", e.Name), zap.Error(err))
			continue
		}
		removed++
		n.logger.Info("reclaimed a quarantined directory", zap.String("dir", e.Name))
	}
	return removed
}

// EvictIdle closes every log nobody used since now - IdleEvictAfter, each
// between two commits, writing its exact boundary to its hwm file. With
// the cold walk off, a log retention still has work in stays open: the
// reaper sweeps only open logs. It returns how many it closed.
func (n *Node) EvictIdle(now time.Time) int {
	closed := 0
	for _, key := range n.reg.IdleSince(now.Add(-n.cfg.IdleEvictAfter)) {
		if n.cfg.ColdWalkInterval <= 0 {
			if l, ok := n.reg.Lookup(key); ok {
				if expired, err := l.Expired(context.Background()); err != nil || expired {
					continue
				}
			}
		}
		if err := n.reg.CloseLive(key); err != nil {
			n.logger.Warn("idle eviction: close", zap.String("topic", key.Topic), zap.Int("partition", key.Partition), zap.Error(err))
			continue
		}
		closed++
	}
	return closed
}

// purgeOrphan deals with a topic directory whose incarnation the
// metastore confirms gone: purged when no record names the topic (a
// delete whose purge never ran: the node closed or crashed between the
// record's removal and the purge, or another node of a cluster took the
// delete), quarantined when the record names another incarnation and
// the marker's copy does not vouch for it either (the topic was deleted
// and made again while this node was away, or while it owns none of the
// topic's partitions, so no open here would find the leftover; a marker
// a bit flip made another id is repaired from its copy, as an open
// would). The marker is read again under the guard and must still be
// that incarnation's: a directory a recreate has stamped since is left
// alone. A directory with no marker that reads is purgeUnmarkedOrphan's.
// It reports whether it removed or moved the directory.
func (n *Node) purgeOrphan(ctx context.Context, name string) bool {
	dir := filepath.Join(n.topicsDir, name)
	marker, err := n.readMarker(dir)
	if unmarked(err) {
		return n.purgeUnmarkedOrphan(ctx, name)
	}
	if err != nil {
		return false
	}
	if !n.ms.CaughtUp() {
		return false // a lagging replica may not know the name yet
	}
	if rec, named, err := n.ms.Topic(ctx, name); err != nil || (named && (rec.Incarnation == marker || rec.Incarnation == "")) {
		return false
	}
	if gone, err := n.ms.IncarnationGone(ctx, name, marker); err != nil || !gone {
		return false
	}
	replaced := false
	err = n.withTopic(name, func(t *supervisor.GuardedTopic) error {
		if now, err := n.readMarker(dir); err != nil || now != marker {
			return errOrphanChanged
		}
		rec, named, err := n.ms.Topic(ctx, name)
		if err != nil {
			return err
		}
		if !named {
			return n.purgeLocked(t, TopicRecord{Name: name, Incarnation: marker})
		}
		if rec.Incarnation == marker || rec.Incarnation == "" {
			return errOrphanChanged
		}
		// The open path's rule decides (judgeMarkers): a marker a bit
		// flip made another id, whose copy vouches for the record, is the
		// live incarnation's (the open repairs it; found by the fault
		// campaign: the sweep quarantined a live directory and the
		// partition came back empty), and an I/O error on either file
		// decides nothing unless the other vouches.
		verdict, old, _ := judgeMarkers(rec.Incarnation,
			readMarkerFile(n.cfg.FS, dir, wire.IncarnationFileName), readMarkerFile(n.cfg.FS, dir, wire.IncarnationCopyFileName))
		if verdict != markersOther || old != marker {
			return errOrphanChanged
		}
		replaced = true
		return n.quarantine(t, rec, marker)
	})
	if errors.Is(err, errOrphanChanged) {
		return false
	}
	if err != nil {
		n.logger.Warn("quarantine sweep: a deleted incarnation's directory", zap.String("topic", name), zap.Error(err))
		return false
	}
	if !replaced {
		n.logger.Info("purged the directory of a deleted topic whose purge never ran",
			zap.String("topic", name), zap.String("incarnation", string(marker)))
	}
	return true
}

var errOrphanChanged = errors.New("the directory changed incarnation meanwhile")

// unmarked reports whether a marker read failed for want of a marker
// that reads (none, or both copies damaged), not for an I/O error.
func unmarked(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, wire.ErrCorrupt)
}

// purgeUnmarkedOrphan purges a topic directory with no marker that reads
// when no record names the topic: the replica, caught up, names none, and
// the leader holds no record under the name at all (IncarnationGone of
// the empty id: the replica may trail the leader by a record written
// just now, whose directory this could be). Such a directory is a deleted
// topic's whose purge never ran on it (a record without an incarnation
// id, as etcdctl writes one, leaves its directories unmarked; so do both
// markers damaged), which the open of a recreate would adopt and stamp,
// serving the deleted topic's records (found by review). A refused record
// keeps it. The checks are made again under the topic's guard, where no
// open can stamp the directory meanwhile. It reports whether it removed
// the directory.
func (n *Node) purgeUnmarkedOrphan(ctx context.Context, name string) bool {
	dir := filepath.Join(n.topicsDir, name)
	if fi, err := n.cfg.FS.Stat(dir); err != nil || !fi.IsDir() || !n.ms.CaughtUp() {
		return false
	}
	if _, named, err := n.ms.Topic(ctx, name); err != nil || named {
		return false
	}
	if gone, err := n.ms.IncarnationGone(ctx, name, ""); err != nil || !gone {
		return false
	}
	err := n.withTopic(name, func(t *supervisor.GuardedTopic) error {
		if fi, err := n.cfg.FS.Stat(dir); err != nil || !fi.IsDir() {
			return errOrphanChanged
		}
		if _, err := n.readMarker(dir); !unmarked(err) {
			return errOrphanChanged // stamped since, or the disk's error
		}
		if _, named, err := n.ms.Topic(ctx, name); err != nil || named {
			return errOrphanChanged
		}
		return n.purgeLocked(t, TopicRecord{Name: name})
	})
	if errors.Is(err, errOrphanChanged) {
		return false
	}
	if err != nil {
		n.logger.Warn("quarantine sweep: a deleted topic's unmarked directory", zap.String("topic", name), zap.Error(err))
		return false
	}
	n.logger.Info("purged the unmarked directory of a deleted topic whose purge never ran", zap.String("topic", name))
	return true
}
