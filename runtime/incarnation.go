package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"path/filepath"
	"time"

	"github.com/narad-io/storage/internal/fsys"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// openUnderGuard opens a partition's log; the registry calls it under the
// topic's guard. It looks the topic up, checks the directory's incarnation
// marker against the record, and only then opens the log.
func (n *Node) openUnderGuard(ctx context.Context, t *supervisor.GuardedTopic, key supervisor.Key) (*partition.Log, error) {
	rec, err := n.admit(ctx, t, key)
	if err != nil {
		return nil, err
	}
	return n.openAdmitted(key, rec)
}

// admit is the open path's checks, under the topic's guard: the metastore
// lookup, the assignment, and the incarnation check (which may quarantine
// the topic's directory). It returns the record to open under.
func (n *Node) admit(ctx context.Context, t *supervisor.GuardedTopic, key supervisor.Key) (TopicRecord, error) {
	rec, ok, err := n.ms.Topic(ctx, key.Topic)
	if err != nil {
		return rec, fmt.Errorf("open %s/%d: metastore: %w", key.Topic, key.Partition, err)
	}
	if !ok {
		return rec, fmt.Errorf("%w: %s", ErrTopicNotFound, key.Topic)
	}
	if key.Partition >= rec.Partitions {
		return rec, fmt.Errorf("%w: %s/%d (the topic has %d)", ErrPartitionNotFound, key.Topic, key.Partition, rec.Partitions)
	}
	if assigned, err := n.ms.Assigned(ctx, key.Topic, key.Partition); err != nil || !assigned {
		return rec, errors.Join(fmt.Errorf("%w: %s/%d", ErrNotAssigned, key.Topic, key.Partition), err)
	}
	return rec, n.checkIncarnation(t, rec)
}

// openAdmitted opens a partition's log that admit let through, under the
// topic's guard; partition.Open creates the directory if it is missing.
func (n *Node) openAdmitted(key supervisor.Key, rec TopicRecord) (*partition.Log, error) {
	if err := n.settleBeforeOpen(key); err != nil {
		return nil, err
	}
	dir, _ := wire.PartitionDirName(key.Partition)
	return partition.Open(filepath.Join(n.topicsDir, key.Topic, dir), partition.Options{
		FS:              n.cfg.FS,
		Codec:           n.cfg.Codec,
		Logger:          n.logger.With(zap.String("topic", key.Topic), zap.Int("partition", key.Partition)),
		Metrics:         n.metrics,
		SegmentMaxBytes: n.cfg.SegmentMaxBytes,
		RetentionMaxAge: time.Duration(rec.RetentionMs) * time.Millisecond,
	})
}

// checkIncarnation compares the topic directory's marker with the record
// (storage-engine.txt, "The incarnation marker"): a match is served; no
// marker, or a damaged one, is adopted (stamped, unless the record has no
// id); a different marker is a deleted incarnation's leftover,
// quarantined. It runs under the topic's guard.
func (n *Node) checkIncarnation(t *supervisor.GuardedTopic, rec TopicRecord) error {
	dir := filepath.Join(n.topicsDir, rec.Name)
	if rec.Incarnation == "" {
		// A record without an id keeps name-based bookkeeping: nothing
		// to compare, nothing to stamp; the directory is made durable
		// before anything acked can live in it.
		return fsys.MkdirAllDurable(n.cfg.FS, dir)
	}
	marker, err := n.readMarker(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		exists, err := fsys.Exists(n.cfg.FS, dir)
		if err != nil {
			return err
		}
		if !exists {
			return n.createTopicDir(dir, rec)
		}
		n.logger.Info("adopting a topic directory without an incarnation marker",
			zap.String("topic", rec.Name), zap.String("incarnation", string(rec.Incarnation)))
		return n.stamp(dir, rec.Incarnation)
	case err != nil && !errors.Is(err, wire.ErrCorrupt):
		return fmt.Errorf("incarnation marker of %s: %w", rec.Name, err)
	case err == nil && marker == rec.Incarnation:
		return nil
	case err != nil || oneBitApart(marker, rec.Incarnation):
		// Markers are written whole (temporary file, rename), so one that
		// does not decode, or is one bit from the record's id (a random id
		// of another incarnation is, with odds of 65 in 2^64), is media
		// damage, not a leftover: quarantining it would take the live data
		// out of service and let the sweep reclaim it. Adopt it, as a
		// directory without a marker is.
		n.logger.Error("incarnation marker damaged; adopting the directory for the record's incarnation",
			zap.String("topic", rec.Name), zap.String("marker", string(marker)), zap.Error(err),
			zap.String("incarnation", string(rec.Incarnation)))
		return n.stamp(dir, rec.Incarnation)
	}
	// A different marker: a deleted incarnation's leftover.
	if err := n.quarantine(t, rec, marker); err != nil {
		return err
	}
	return n.createTopicDir(dir, rec)
}

// oneBitApart reports whether two ids differ in exactly one bit of their
// text.
func oneBitApart(a, b wire.IncarnationID) bool {
	if len(a) != len(b) {
		return false
	}
	flipped := 0
	for i := range len(a) {
		flipped += bits.OnesCount8(a[i] ^ b[i])
	}
	return flipped == 1
}

func (n *Node) readMarker(dir string) (wire.IncarnationID, error) {
	b, err := fsys.ReadFile(n.cfg.FS, filepath.Join(dir, wire.IncarnationFileName), 64)
	if err != nil {
		if errors.Is(err, fsys.ErrFileTooLarge) {
			return "", fmt.Errorf("%w: %w", wire.ErrCorrupt, err)
		}
		return "", err
	}
	return wire.DecodeIncarnationMarker(b)
}

func (n *Node) writeMarker(dir string, id wire.IncarnationID) error {
	b, err := wire.EncodeIncarnationMarker(id)
	if err != nil {
		return err
	}
	return fsys.WriteFileAtomic(n.cfg.FS, filepath.Join(dir, wire.IncarnationFileName), b)
}

// createTopicDir makes a topic's directory durable and stamps it.
func (n *Node) createTopicDir(dir string, rec TopicRecord) error {
	if err := fsys.MkdirAllDurable(n.cfg.FS, dir); err != nil {
		return fmt.Errorf("create topic directory %s: %w", dir, err)
	}
	return n.stamp(dir, rec.Incarnation)
}

// stamp makes the topic directory's own entry durable, then writes its
// marker: a marker is only ever found in a directory that survives a
// power loss, whoever created it. A directory found without one may be
// an earlier attempt's whose entry never reached the media (a failed
// directory sync, a process that crashed before it; found by the fault
// campaign: acked records lost with a directory entry an EIO left
// unsynced), so adopting one syncs it too.
func (n *Node) stamp(dir string, id wire.IncarnationID) error {
	if err := n.cfg.FS.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("sync the entry of %s: %w", dir, err)
	}
	return n.writeMarker(dir, id)
}

// quarantine retires a deleted incarnation's directory: the topic's open
// logs are closed (no produce gate: nothing valid is left to protect), the
// directory is renamed to <name>.stale-<oldid> and the rename made
// durable, the old incarnation's consumer state is dropped before any
// fresh directory exists, and both ids are logged at error.
func (n *Node) quarantine(t *supervisor.GuardedTopic, rec TopicRecord, old wire.IncarnationID) error {
	if err := t.CloseAll(); err != nil {
		n.logger.Warn("closing a stale incarnation's logs", zap.String("topic", rec.Name), zap.Error(err))
	}
	staleName, err := wire.StaleDirName(rec.Name, old)
	if err != nil {
		return err
	}
	stale := filepath.Join(n.topicsDir, staleName)
	if err := n.cfg.FS.RemoveAll(stale); err != nil { // an earlier leftover of the same incarnation
		return fmt.Errorf("quarantine %s: %w", rec.Name, err)
	}
	if err := n.cfg.FS.Rename(filepath.Join(n.topicsDir, rec.Name), stale); err != nil {
		return fmt.Errorf("quarantine %s: %w", rec.Name, err)
	}
	if err := n.cfg.FS.SyncDir(n.topicsDir); err != nil {
		return fmt.Errorf("quarantine %s: sync topics: %w", rec.Name, err)
	}
	n.dropConsumerState(rec.Name, old)
	n.logger.Error("topic directory belongs to a deleted incarnation: quarantined, never served",
		zap.String("topic", rec.Name), zap.String("stale_incarnation", string(old)),
		zap.String("current_incarnation", string(rec.Incarnation)), zap.String("moved_to", stale))
	return nil
}

// recheck runs when a topic's metadata version moves: an open log whose
// incarnation was deleted (or replaced) is retired rather than left
// serving the old data; a retention change reaches the open logs in place.
//
// The record is read under the topic's guard, as an open reads it: read
// before, it may predate a recreate and an open of the new incarnation
// that came in between, and retire that live log (found by the fault
// campaign: the reference workload's calls differed from run to run).
func (n *Node) recheck(topic string) {
	ctx := context.Background()
	err := n.withTopic(topic, func(t *supervisor.GuardedTopic) error {
		if len(t.Open()) == 0 {
			return nil
		}
		rec, ok, err := n.ms.Topic(ctx, topic)
		if err != nil {
			return err
		}
		marker, err := n.readMarker(filepath.Join(n.topicsDir, topic))
		if !ok || (rec.Incarnation != "" && (err != nil || marker != rec.Incarnation)) {
			n.logger.Warn("retiring the open logs of a deleted or replaced incarnation", zap.String("topic", topic))
			return t.CloseAll()
		}
		for _, p := range t.Open() {
			if l, ok := t.Lookup(p); ok {
				if err := l.SetRetentionMaxAge(ctx, time.Duration(rec.RetentionMs)*time.Millisecond); err != nil && !errors.Is(err, partition.ErrLogClosed) {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		n.logger.Warn("metadata recheck", zap.String("topic", topic), zap.Error(err))
	}
}
