package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/narad-io/storage/coldwalk"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/reaper"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// The node's half of docs/design.md, "Retention": it starts the reaper
// over its open logs and, when ColdWalkInterval is set, the cold walk over
// its closed partitions, and it gives the walk its guarded open. Retention
// changes reach open logs in place (retainInPlace), this node's own from
// UpdateRetention (topics.go) and others' through recheck
// (incarnation.go); idle eviction's rule for retention logs is in
// EvictIdle (startup.go).

// startRetentionLoops starts the reaper and, unless it is off, the cold
// walk.
func (n *Node) startRetentionLoops() []*supervisor.Loop {
	r := reaper.Start(reaper.Config{
		Interval:   n.cfg.ReaperInterval,
		Logger:     n.logger,
		Registerer: n.promReg,
	}, n.openTargets)
	n.reaper.Store(r)
	if n.reapAsked.Load() {
		r.Trigger() // a change moved bounds before there was a reaper to ask
	}
	loops := []*supervisor.Loop{r}
	if n.cfg.ColdWalkInterval > 0 {
		loops = append(loops, coldwalk.Start(coldwalk.Config{
			FS:         n.cfg.FS,
			TopicsDir:  n.topicsDir,
			Node:       coldNode{n},
			Interval:   n.cfg.ColdWalkInterval,
			Logger:     n.logger,
			Registerer: n.promReg,
		}))
	}
	return loops
}

// retainInPlace sets rec's retention bounds on t's open logs, in place,
// and when they moved any log's, asks the reaper for a pass now: the new
// bounds are applied at once, whether or not anything is written to the
// logs again, rather than at the reaper's next interval (a pass under way
// when it is asked finishes first, then the asked one runs). A change of
// the record that keeps the bounds (its create, say) asks for none. It
// runs under t's guard, with rec read under it, so of two changes at once
// the newer bounds are the ones left. Before Start has started the
// reaper (a change through the feed while the node starts), the reaper
// is asked for a pass as it starts (reapAsked).
func (n *Node) retainInPlace(ctx context.Context, t *supervisor.GuardedTopic, rec TopicRecord) error {
	moved := false
	for _, p := range t.Open() {
		if l, ok := t.Lookup(p); ok {
			changed, err := l.SetRetention(ctx, rec.Retention().maxAge(), rec.RetentionBytes)
			if err != nil && !errors.Is(err, partition.ErrLogClosed) {
				return err
			}
			moved = moved || changed
		}
	}
	if moved {
		// Flag, then look: either this sees the reaper Start stores, or
		// Start, which stores it before it looks, sees the flag.
		n.reapAsked.Store(true)
		if r := n.reaper.Load(); r != nil {
			r.Trigger()
		}
	}
	return nil
}

// openTargets lists the open logs for a reaper pass. It reads the registry
// without touching the logs' last use, so the reaper never keeps a log
// from idle eviction.
func (n *Node) openTargets() []reaper.Target {
	keys := n.reg.Keys()
	out := make([]reaper.Target, 0, len(keys))
	for _, k := range keys {
		if l, ok := n.reg.Lookup(k); ok {
			out = append(out, reaper.Target{Topic: k.Topic, Partition: k.Partition, Log: l})
		}
	}
	return out
}

// coldNode is the node as the cold walk sees it (coldwalk.Node).
type coldNode struct{ n *Node }

var _ coldwalk.Node = coldNode{}

func (c coldNode) CaughtUp() bool { return c.n.ms.CaughtUp() }

func (c coldNode) Retention(ctx context.Context, topic string) (maxAge time.Duration, maxBytes int64, ok bool, err error) {
	rec, ok, err := c.n.ms.Topic(ctx, topic)
	return rec.Retention().maxAge(), rec.RetentionBytes, ok, err
}

func (c coldNode) Assigned(ctx context.Context, topic string, p int) (bool, error) {
	return c.n.ms.Assigned(ctx, topic, p)
}

func (c coldNode) IsOpen(topic string, p int) bool {
	_, ok := c.n.reg.Lookup(supervisor.Key{Topic: topic, Partition: p})
	return ok
}

// SweepCold sweeps a closed partition once (coldwalk.Node). Everything
// runs under the topic's guard, so no lazy open, reclaim, quarantine or
// purge of the topic runs in between: the directory must still exist (an
// open must never undo a reclaim or quarantine by recreating an empty
// partition at offset 0) and the log must still be closed; then the open
// path's checks (metastore record, assignment, incarnation, which may
// quarantine the directory: checked again after), the open, one Sweep and
// the close, deferred so it runs even if the sweep panics. The log is
// never installed in the registry, and no produce gate is needed: nothing
// can write to a log nobody else can reach.
func (c coldNode) SweepCold(ctx context.Context, topic string, p int) (res partition.SweepResult, err error) {
	n := c.n
	key, err := n.key(topic, p)
	if err != nil {
		return res, err
	}
	dirName, _ := wire.PartitionDirName(p)
	dir := filepath.Join(n.topicsDir, topic, dirName)
	err = n.withTopic(topic, func(t *supervisor.GuardedTopic) error {
		if _, open := t.Lookup(p); open {
			return fmt.Errorf("%w: %s/%d", coldwalk.ErrPartitionOpen, topic, p)
		}
		if err := mustExist(n.cfg.FS, dir); err != nil {
			return err
		}
		rec, err := n.admit(ctx, t, key)
		if err != nil {
			return err
		}
		if err := mustExist(n.cfg.FS, dir); err != nil {
			return err // admit quarantined the topic's directory
		}
		l, err := n.openAdmitted(key, rec)
		if err != nil {
			return err
		}
		defer func() {
			if closeErr := l.Close(); closeErr != nil {
				n.logger.Warn("cold retention: close", zap.String("topic", topic), zap.Int("partition", p), zap.Error(closeErr))
			}
		}()
		res, err = l.Sweep(ctx)
		return err
	})
	return res, err
}

// mustExist answers coldwalk.ErrPartitionGone for a directory that is not
// there, and the error of a stat that could not tell.
func mustExist(files vfs.FS, dir string) error {
	exists, err := vfs.Exists(files, dir)
	if err != nil {
		return fmt.Errorf("cold retention: stat %s: %w", dir, err)
	}
	if !exists {
		return fmt.Errorf("%w: %s", coldwalk.ErrPartitionGone, dir)
	}
	return nil
}
