package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// ErrStaleIncarnation: the directory belongs to another incarnation than
// the metastore's record (or the one the caller expects).
var ErrStaleIncarnation = errors.New("runtime: stale incarnation")

// SegmentFile is one segment of a transfer listing.
type SegmentFile struct {
	Name string
	Base int64
	Size int64
}

// CursorFile is a fan-out cursor's position file of a transfer listing:
// its file name and the position it holds (its cursor's newest, written
// out for the listing).
type CursorFile struct {
	Name     string
	Position int64
}

// TransferListing is what a move's source serves: a partition's segment
// files, its boundary, and its fan-out cursors' positions, which move with
// it.
type TransferListing struct {
	Incarnation   wire.IncarnationID
	Segments      []SegmentFile
	HighWatermark int64
	Known         bool // false: no boundary on disk (an empty hwm file after a crash)
	Cursors       []CursorFile
	// Consumer is the queue consumer's progress files present (those of
	// consumerFiles; Base unused): final once the partition's log is
	// closed, which writes them out.
	Consumer []SegmentFile
}

// consumerFiles are the queue consumer's progress files, which move with
// a partition: its frontier (consumer.offset, consumer.ahead), the whole
// acked-ahead set a clean close left (consumer.acked), and its lease id
// floor (consumer.lease).
var consumerFiles = []string{wire.ConsumerOffsetFileName, wire.ConsumerAheadFileName, wire.ConsumerAckedFileName, wire.ConsumerLeaseFileName}

// consumerFileLimit is the largest a consumer progress file can be; ok is
// false for a name that is not one.
func consumerFileLimit(name string) (limit int64, ok bool) {
	switch name {
	case wire.ConsumerOffsetFileName:
		return wire.OffsetFileSize, true
	case wire.ConsumerAheadFileName:
		return wire.AheadFileSize, true
	case wire.ConsumerAckedFileName:
		return wire.AckedMaxFileSize, true
	case wire.ConsumerLeaseFileName:
		return wire.LeaseFloorFileSize, true
	}
	return 0, false
}

// TransferListing lists a partition's segment files and boundary from its
// directory, without opening its log, and refuses a directory whose
// incarnation marker is not the metastore's (docs/design.md, "The
// incarnation marker": the listing makes the open path's comparison
// itself). It waits for a close in progress, under the topic's guard.
func (n *Node) TransferListing(ctx context.Context, topic string, p int) (TransferListing, error) {
	key, err := n.key(topic, p)
	if err != nil {
		return TransferListing{}, err
	}
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return TransferListing{}, err
	}
	if !ok {
		return TransferListing{}, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	if p >= rec.Partitions {
		return TransferListing{}, fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, topic, p)
	}
	var out TransferListing
	err = n.withTopic(topic, func(t *supervisor.GuardedTopic) error {
		marker, err := n.readMarker(filepath.Join(n.topicsDir, topic))
		if err != nil {
			return fmt.Errorf("transfer listing of %s/%d: %w", topic, p, err)
		}
		if marker != rec.Incarnation {
			return fmt.Errorf("%w: %s marker %q (%v), record %q", ErrStaleIncarnation, topic, marker, err, rec.Incarnation)
		}
		info, segments, err := n.peekLocked(t, key)
		if err != nil {
			return err
		}
		out = TransferListing{Incarnation: rec.Incarnation, Segments: segments, HighWatermark: info.HighWatermark, Known: info.Known}
		if out.Cursors, err = n.listCursors(key); err != nil {
			return err
		}
		dir, _ := wire.PartitionDirName(p)
		for _, name := range consumerFiles {
			fi, err := n.cfg.FS.Stat(filepath.Join(n.topicsDir, topic, dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			out.Consumer = append(out.Consumer, SegmentFile{Name: name, Size: fi.Size})
		}
		return nil
	})
	return out, err
}

// OpenTransferFile opens one file of a partition for a move's transfer (a
// segment, or a consumer progress file, named as the listing gives it),
// read-only, after the listing's checks: the directory's marker must be
// the record's incarnation. The file is the caller's to close; read up to
// the size the listing gave (a segment only grows, and what is past that
// size is not the listing's).
func (n *Node) OpenTransferFile(ctx context.Context, topic string, p int, name string) (vfs.File, error) {
	key, err := n.key(topic, p)
	if err != nil {
		return nil, err
	}
	if _, consumer := consumerFileLimit(name); !consumer {
		if _, err := wire.ParseSegmentFileName(name); err != nil {
			return nil, fmt.Errorf("%w: %q is not a segment or consumer progress file", ErrPartitionNotFound, name)
		}
	}
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !ok || p >= rec.Partitions {
		return nil, fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, topic, p)
	}
	var f vfs.File
	err = n.withTopic(topic, func(*supervisor.GuardedTopic) error {
		marker, err := n.readMarker(filepath.Join(n.topicsDir, topic))
		if err != nil {
			return fmt.Errorf("transfer of %s/%d: %w", topic, p, err)
		}
		if marker != rec.Incarnation {
			return fmt.Errorf("%w: %s marker %q, record %q", ErrStaleIncarnation, topic, marker, rec.Incarnation)
		}
		if err := n.settleBeforeOpen(key); err != nil {
			return err
		}
		dir, _ := wire.PartitionDirName(p)
		f, err = n.cfg.FS.OpenFile(filepath.Join(n.topicsDir, topic, dir, name), os.O_RDONLY)
		return err
	})
	return f, err
}

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

// FreezePartition is a move's old owner's, once the metastore no longer
// assigns it the partition (the move frozen): it closes the partition's
// live log between two commits (in-flight produces finish first, and the
// log writes its exact boundary to the hwm file), after which no open of
// it is admitted here, so the files a listing then gives are final. A
// partition the metastore still assigns this node is refused
// (ErrAssigned), its log left open.
func (n *Node) FreezePartition(ctx context.Context, topic string, p int) error {
	key, err := n.key(topic, p)
	if err != nil {
		return err
	}
	notMine := func() error {
		if mine, err := n.ms.Assigned(ctx, topic, p); err != nil || mine {
			return errors.Join(fmt.Errorf("%w: %s/%d", ErrAssigned, topic, p), err)
		}
		return nil
	}
	if err := notMine(); err != nil {
		return err // its log left open
	}
	return nodeClosedError(n.reg.WithPartitionClosed(key, func(*supervisor.GuardedTopic) error { return notMine() }))
}

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
