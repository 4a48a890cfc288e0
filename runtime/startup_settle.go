package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Start's first pass (runtime/doc.go, "Startup check and recovery"):
// every owned partition's boundary is on disk and exact before the node
// reports ready. Each one's directory is read without opening its log
// (readBoundary); one whose boundary is not exact (a crash) is opened and
// closed again, which recovers it and writes the boundary. The pass runs
// under each topic's guard, a chunk of partitions at a time, and within a
// chunk on many partitions at once, so one topic of 100,000 partitions
// is as parallel as 100,000 topics of one.

// startupChunk is how many of one topic's partitions the pass settles
// under one hold of the topic's guard: enough that taking the guard
// costs nothing beside them, few enough that a call that opens one of the
// topic's logs before ready waits for one chunk, not the topic.
const startupChunk = 256

// startupParallelism bounds the partitions the pass reads or recovers at
// once, over all topics. A recovery is an fsync of the active segment
// and, at its close, one of the hwm file, which a device serves many of
// at a time (as Close's closeParallelism). With an open-log budget it is
// at most the budget: each recovery holds a log open outside the
// registry, whose slots are all free before the pass ends.
const startupParallelism = 32

// startupSettled is what the pass leaves for the opens after it.
//
// Invariant: mu guards every field; a key is in at most one of them.
type startupSettled struct {
	mu        sync.Mutex
	recovered []supervisor.Key        // opened and closed again to write their boundary
	unwritten []supervisor.Key        // opened, but their close could not write the boundary
	skipped   map[supervisor.Key]bool // failed, warned of: left to their first use
}

func (s *startupSettled) keepOpen(key supervisor.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unwritten = append(s.unwritten, key)
}

func (s *startupSettled) recover(key supervisor.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recovered = append(s.recovered, key)
}

func (s *startupSettled) skip(key supervisor.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skipped[key] = true
}

// settleAtStartup runs the pass over the owned partitions of topics. It
// fails only when ctx ends or Close begins (ErrNodeClosed); a partition
// that fails is warned of and skipped, as its open would have been.
func (n *Node) settleAtStartup(ctx context.Context, topics []TopicRecord, owned map[string][]int, prog *startupProgress) (*startupSettled, error) {
	out := &startupSettled{skipped: map[supervisor.Key]bool{}}
	slots := startupParallelism
	if limit := n.reg.MaxOpen(); limit > 0 {
		slots = min(slots, limit)
	}
	if n.serial() {
		slots = 1
	}
	sem := make(chan struct{}, slots)
	var g errgroup.Group
	g.SetLimit(slots) // a topic waits on the shared slots, not on other topics
	for _, t := range topics {
		parts := owned[t.Name]
		g.Go(func() error {
			for from := 0; from < len(parts); from += startupChunk {
				if err := ctx.Err(); err != nil {
					return err
				}
				chunk := parts[from:min(from+startupChunk, len(parts))]
				if err := n.settleChunk(ctx, t.Name, chunk, sem, out, prog); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.SortFunc(out.recovered, func(a, b supervisor.Key) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return a.Partition - b.Partition
	})
	return out, nil
}

// settleChunk settles parts of topic under the topic's guard: the open
// path's checks first (the record, the incarnation marker, which may
// quarantine or stamp the directory, then each partition's range,
// assignment and unsettled install, as admit and openAdmitted make
// them), then each partition on a slot of sem, by up to cap(sem)
// workers. A partition a call opened meanwhile is the open's: nothing to
// do.
func (n *Node) settleChunk(ctx context.Context, topic string, parts []int, sem chan struct{},
	out *startupSettled, prog *startupProgress) error {
	return n.withTopic(topic, func(t *supervisor.GuardedTopic) error {
		rec, topicErr := n.admitTopicAtStartup(ctx, t, topic)
		var todo []supervisor.Key
		for _, p := range parts {
			key := supervisor.Key{Topic: topic, Partition: p}
			err := topicErr
			if err == nil {
				err = n.admitPartitionAtStartup(ctx, rec, key)
			}
			if err != nil {
				out.skip(key)
				prog.skip(key, err)
				continue
			}
			if _, open := t.Lookup(p); open {
				prog.settled(false)
				continue
			}
			todo = append(todo, key)
		}
		work := make(chan supervisor.Key)
		var wg sync.WaitGroup
		for range min(cap(sem), len(todo)) {
			wg.Go(func() {
				for key := range work {
					sem <- struct{}{}
					n.settlePartition(ctx, rec, key, out, prog)
					<-sem
				}
			})
		}
		defer wg.Wait()
		defer close(work)
		for _, key := range todo {
			select {
			case work <- key:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

// admitTopicAtStartup is admit's part for the whole topic: the record,
// then the incarnation check, after which the directory is the record's.
func (n *Node) admitTopicAtStartup(ctx context.Context, t *supervisor.GuardedTopic, topic string) (TopicRecord, error) {
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return rec, fmt.Errorf("open %s: metastore: %w", topic, err)
	}
	if !ok {
		return rec, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	return rec, n.checkIncarnation(t, rec)
}

// admitPartitionAtStartup is admit's part for one partition, and the
// settle of an install this process left unsettled (openAdmitted's).
func (n *Node) admitPartitionAtStartup(ctx context.Context, rec TopicRecord, key supervisor.Key) error {
	if key.Partition >= rec.Partitions {
		return fmt.Errorf("%w: %s/%d (the topic has %d)", ErrPartitionNotFound, key.Topic, key.Partition, rec.Partitions)
	}
	if assigned, err := n.ms.Assigned(ctx, key.Topic, key.Partition); err != nil || !assigned {
		return errors.Join(fmt.Errorf("%w: %s/%d", ErrNotAssigned, key.Topic, key.Partition), err)
	}
	return n.settleBeforeOpen(key)
}

// settlePartition settles one partition, under its topic's guard (held
// by the caller's goroutine): a boundary on disk that is exact is kept
// as it is, anything else recovered. The high watermark gauge gets the
// boundary (the partition stays closed, or is opened after the pass),
// and the cursors the directory holds their series.
func (n *Node) settlePartition(ctx context.Context, rec TopicRecord, key supervisor.Key, out *startupSettled, prog *startupProgress) {
	dirName, _ := wire.PartitionDirName(key.Partition)
	topicDir := filepath.Join(n.topicsDir, key.Topic)
	b, err := readBoundary(n.cfg.FS, filepath.Join(topicDir, dirName))
	if err == nil && b.exact {
		n.marks.seed(key, rec.Incarnation, b.hwm)
		n.discoverCursors(key.Topic, b.entries)
		prog.settled(false)
		return
	}
	hwm, err := n.recoverAtStartup(ctx, key, rec)
	if errors.Is(err, errRecoveryClose) {
		// The open recovered it, but its boundary is not on disk: what
		// the file holds (zeros of a torn close, say) must not be read
		// as it while the partition is closed. Start opens it and leaves
		// it open, as it did every partition before the check (found by
		// review).
		n.logger.Warn("startup: a recovered partition's boundary could not be written; opening it",
			zap.String("topic", key.Topic), zap.Int("partition", key.Partition), zap.Error(err))
		n.cursors.discover(topicDir, key.Partition)
		out.keepOpen(key)
		prog.settled(true)
		return
	}
	if err != nil {
		out.skip(key)
		prog.skip(key, err)
		return
	}
	n.marks.seed(key, rec.Incarnation, hwm)
	n.cursors.discover(topicDir, key.Partition)
	out.recover(key)
	prog.settled(true)
}

// errRecoveryClose: a recovery's open succeeded and its close failed, so
// the partition's boundary may not be on disk.
var errRecoveryClose = errors.New("close after recovery")

// recoverAtStartup opens a partition whose boundary is not exact and
// closes it again, outside the registry (as a cold sweep does), under
// the topic's guard the caller holds: the open recovers the log (the
// active segment fsynced, the boundary taken from its CRC-checked tail,
// a torn tail cut) and the close writes the exact boundary to the hwm
// file and syncs it. It retries an open that met the open-file limit,
// as Start's opens do, and returns the boundary.
func (n *Node) recoverAtStartup(ctx context.Context, key supervisor.Key, rec TopicRecord) (int64, error) {
	for try := 0; ; try++ {
		l, err := n.openAdmitted(key, rec)
		if err == nil {
			hwm := l.HighWatermark()
			if err := l.Close(); err != nil {
				return 0, fmt.Errorf("%w: %w", errRecoveryClose, err)
			}
			return hwm, nil
		}
		if !errors.Is(busyError(err), ErrBusy) || try == startupBusyRetries {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(startupBusyPause):
		}
	}
}

// discoverCursors exposes the dropped-records series of every cursor
// a partition directory's listing holds, at zero (cursors.discover, from
// a listing already read).
func (n *Node) discoverCursors(topic string, entries []vfs.DirEntry) {
	for _, e := range entries {
		if name, ok := wire.ParseCursorFileName(e.Name); ok {
			n.cursors.dropped.WithLabelValues(topic, name)
		}
	}
}
