package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// DropPartition removes this node's copy of a partition it no longer
// owns (a move's old owner, once the move completed): its live log is
// closed between two commits, its in-memory state forgotten, and its
// directory removed, durably. A partition the metastore assigns this node
// is refused (ErrAssigned): the caller confirms, with the leader, that
// another node owns it first. A directory already gone is nothing to do.
func (n *Node) DropPartition(ctx context.Context, topic string, p int) error {
	key, err := n.key(topic, p)
	if err != nil {
		return err
	}
	dropped := false
	err = n.releasePartition(ctx, key, func(paths installPaths) error {
		// Never a removal cut short under the live name: the directory is
		// renamed aside first, and a crash leaves the set-aside directory
		// for the next start to remove (settleInstall).
		exists, err := vfs.Exists(n.cfg.FS, paths.final)
		if err != nil || !exists {
			return err
		}
		dropped = true
		if err := n.cfg.FS.RemoveAll(paths.dropped); err != nil {
			return err
		}
		if err := n.cfg.FS.Rename(paths.final, paths.dropped); err != nil {
			return err
		}
		if err := n.cfg.FS.SyncDir(paths.topicDir); err != nil {
			return err
		}
		if err := n.cfg.FS.RemoveAll(paths.dropped); err != nil {
			return err
		}
		return n.cfg.FS.SyncDir(paths.topicDir)
	})
	if err != nil {
		return fmt.Errorf("drop %s/%d: %w", topic, p, err)
	}
	if dropped {
		n.logger.Info("dropped this node's copy of a partition another node owns", zap.String("topic", topic), zap.Int("partition", p))
	}
	return nil
}

// releasePartition is what DropPartition and SetAsidePartition share: with
// the partition's live log closed between two commits and no open of it
// admitted (supervisor.Registry.WithPartitionClosed), it refuses a
// partition the metastore assigns this node (ErrAssigned) and one a
// receive is under way for (ErrReceiveInProgress), settles an install
// this process left unsettled, forgets the partition's in-memory state
// (its high watermark mark, cursors and queue state), and hands the
// partition's paths to release, which takes the directory out of
// topics/. release runs under the topic's guard.
func (n *Node) releasePartition(ctx context.Context, key supervisor.Key, release func(installPaths) error) error {
	err := n.reg.WithPartitionClosed(key, func(*supervisor.GuardedTopic) error {
		if mine, err := n.ms.Assigned(ctx, key.Topic, key.Partition); err != nil || mine {
			return errors.Join(fmt.Errorf("%w: %s/%d", ErrAssigned, key.Topic, key.Partition), err)
		}
		if _, busy := n.receiving.Load(key); busy {
			return fmt.Errorf("%w: %s/%d", ErrReceiveInProgress, key.Topic, key.Partition)
		}
		if err := n.settleBeforeOpen(key); err != nil {
			return err
		}
		n.marks.forget(key)
		n.cursors.forget(ofPartition(key))
		n.queues.forget(func(k supervisor.Key) bool { return k == key })
		return release(n.installPathsOf(key))
	})
	return nodeClosedError(err)
}

// ErrAssigned: the partition is this node's, so its copy is neither
// dropped nor set aside.
var ErrAssigned = errors.New("runtime: the partition is assigned to this node")

// PartitionDirs lists the partitions of a topic this node holds a
// directory of, whoever owns them: the copies a node checks against the
// assignment.
func (n *Node) PartitionDirs(topic string) ([]int, error) {
	if err := wire.ValidateTopicName(topic); err != nil {
		return nil, err
	}
	entries, err := n.cfg.FS.ReadDir(filepath.Join(n.topicsDir, topic))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if p, err := wire.ParsePartitionDirName(e.Name); err == nil && e.IsDir {
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out, nil
}
