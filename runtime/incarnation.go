package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
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
	if err := t.Reserve(); err != nil { // the open is valid: take its slot of the budget
		return nil, err
	}
	l, err := n.openAdmitted(key, rec)
	if err == nil {
		// Only logs the registry holds count: a cold sweep's open and
		// close go around it.
		n.marks.open(key, rec.Incarnation, l)
		n.topicMetrics.add(key.Topic)
	}
	return l, err
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
	dicts, err := n.dictionariesLocked(rec)
	if err != nil {
		return nil, err // the disk's error: the open fails and is retried, no frame read as damage
	}
	dir, _ := wire.PartitionDirName(key.Partition)
	l, err := partition.Open(filepath.Join(n.topicsDir, key.Topic, dir), partition.Options{
		FS:                n.cfg.FS,
		Codec:             n.cfg.Codec,
		Dictionaries:      dicts,
		Logger:            n.logger.With(zap.String("topic", key.Topic), zap.Int("partition", key.Partition)),
		Metrics:           n.metrics,
		SegmentMaxBytes:   n.cfg.SegmentMaxBytes,
		RetentionMaxAge:   rec.Retention().maxAge(),
		RetentionMaxBytes: rec.RetentionBytes,
		CacheBudget:       n.cacheBudget,
		Space:             n.disk.space(),
	})
	if err != nil {
		return nil, err
	}
	// Queue consumers parked on the topic, and its topic-wide waits, are
	// woken by its logs' commits.
	parked, watch := n.queues.wakeNotifier(key), n.watches.of(key.Topic)
	l.SetWakeNotifier(func() {
		parked()
		watch.announce(key.Partition)
	})
	return l, nil
}

// checkIncarnation compares the topic directory's marker with the record
// (docs/design.md, "The incarnation marker"): a match is served; no
// marker is adopted (stamped, unless the record has no id); a different
// marker is a deleted incarnation's leftover, quarantined. The marker has
// a copy (wire.IncarnationCopyFileName): when one is missing or damaged,
// the other decides, and when neither decodes the directory is refused
// (ErrIncarnationMarkerDamaged). It runs under the topic's guard. While
// the topic has a log open, a match found before is remembered and the
// markers are not read again (vouchedTopics has when it is forgotten).
func (n *Node) checkIncarnation(t *supervisor.GuardedTopic, rec TopicRecord) error {
	dir := filepath.Join(n.topicsDir, rec.Name)
	if rec.Incarnation == "" {
		// A record without an id keeps name-based bookkeeping: nothing
		// to compare, nothing to stamp; the directory is made durable
		// before anything acked can live in it.
		return vfs.MkdirAllDurable(n.cfg.FS, dir)
	}
	if n.vouched.vouches(rec.Name, rec.Incarnation) {
		return nil
	}
	marker, copied := readMarkerFile(n.cfg.FS, dir, wire.IncarnationFileName), readMarkerFile(n.cfg.FS, dir, wire.IncarnationCopyFileName)
	verdict, old, err := judgeMarkers(rec.Incarnation, marker, copied)
	switch verdict {
	case markersUnreadable:
		return fmt.Errorf("incarnation marker of %s: %w", rec.Name, err)
	case markersVouch:
		n.vouched.remember(rec.Name, rec.Incarnation)
		return nil
	case markersOneVouches:
		// One of the two is missing (a crash between their writes, or a
		// directory stamped before the copy existed), damaged or failing
		// reads: the other vouches for the directory; write both again.
		if !errors.Is(marker.err, fs.ErrNotExist) && !errors.Is(copied.err, fs.ErrNotExist) {
			n.logger.Error("incarnation marker or its copy damaged; the other vouches for the directory, rewriting both",
				zap.String("topic", rec.Name), zap.NamedError("marker", marker.err), zap.NamedError("copy", copied.err))
		}
		return n.writeMarker(dir, rec.Incarnation)
	case markersOther:
		// A different incarnation's: a deleted incarnation's leftover.
		if err := n.quarantine(t, rec, old); err != nil {
			return err
		}
		return n.createTopicDir(dir, rec)
	case markersAbsent:
		exists, err := vfs.Exists(n.cfg.FS, dir)
		if err != nil {
			return err
		}
		if !exists {
			return n.createTopicDir(dir, rec)
		}
		n.logger.Info("adopting a topic directory without an incarnation marker",
			zap.String("topic", rec.Name), zap.String("incarnation", string(rec.Incarnation)))
		return n.stamp(dir, rec.Incarnation)
	}
	// Neither decodes: both writes of the marker were lost (lying fsyncs
	// and a power loss), or both files damaged. The directory is taken as
	// the record's, stamped again and served: refusing it would hide every
	// honest commit in it, and the other reading, a deleted incarnation's
	// leftover, needs that double fault on the deleted incarnation's
	// marker and a purge that never finished besides. Only evidence of
	// another incarnation (a partition's consumer progress written under
	// another id) refuses it.
	if other, err := n.otherIncarnationIn(dir, rec.Incarnation); err != nil {
		return err
	} else if other != "" {
		n.logger.Error("incarnation marker and its copy damaged, and consumer progress names another incarnation; the topic directory is not served",
			zap.String("topic", rec.Name), zap.String("incarnation", string(rec.Incarnation)), zap.String("other", string(other)),
			zap.NamedError("marker", marker.err), zap.NamedError("copy", copied.err))
		return fmt.Errorf("%w: %s: consumer progress names incarnation %s; marker: %v; copy: %v",
			ErrIncarnationMarkerDamaged, dir, other, marker.err, copied.err)
	}
	n.logger.Error("incarnation marker and its copy damaged; taking the directory as the record's incarnation and stamping it again",
		zap.String("topic", rec.Name), zap.String("incarnation", string(rec.Incarnation)),
		zap.NamedError("marker", marker.err), zap.NamedError("copy", copied.err))
	return n.stamp(dir, rec.Incarnation)
}

// otherIncarnationIn returns an incarnation other than id that a
// partition's consumer progress in dir was written under, if any
// (consumer.ahead carries its incarnation, checksummed).
func (n *Node) otherIncarnationIn(dir string, id wire.IncarnationID) (wire.IncarnationID, error) {
	entries, err := n.cfg.FS.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if _, err := wire.ParsePartitionDirName(e.Name); err != nil {
			continue
		}
		b, err := vfs.ReadFile(n.cfg.FS, filepath.Join(dir, e.Name, wire.ConsumerAheadFileName), wire.AheadFileSize)
		if err != nil {
			continue // none, or unreadable: no evidence either way
		}
		for slot := range 2 {
			start := int(wire.AheadSlotOffset(slot))
			if start >= len(b) {
				break
			}
			rec, err := wire.DecodeAheadSlot(b[start:min(start+wire.AheadSlotSize, len(b))])
			if err == nil && rec.Incarnation != "" && rec.Incarnation != id {
				return rec.Incarnation, nil
			}
		}
	}
	return "", nil
}

// ErrIncarnationMarkerDamaged: neither a topic directory's incarnation
// marker nor its copy decodes, and a partition's consumer progress names
// another incarnation than the record's: the directory may be a deleted
// incarnation's. Its partitions are not served until an operator writes
// the marker (the record's id, 16 hex characters and a newline, in
// topics/<name>/incarnation) or removes the directory.
var ErrIncarnationMarkerDamaged = errors.New("runtime: incarnation marker damaged")

// markerVerdict is what a topic directory's marker and its copy say
// about it against a record's incarnation.
type markerVerdict int

const (
	markersVouch      markerVerdict = iota // both are the record's
	markersOneVouches                      // one is, the other missing, damaged or failing reads: write both again
	markersOther                           // one decodes to another incarnation and neither vouches: a deleted incarnation's leftover
	markersAbsent                          // neither exists
	markersDamaged                         // neither decodes (and no I/O error)
	markersUnreadable                      // an I/O error and neither vouches: decide nothing, try again later
)

// judgeMarkers is the one rule the open path (checkIncarnation) and the
// sweep (purgeOrphan) both apply: an I/O error is never taken for damage
// or for another incarnation unless the other file vouches; a file that
// vouches outweighs one that names another incarnation. For markersOther
// it returns the other incarnation (the marker's, else the copy's); for
// markersUnreadable, the I/O error.
func judgeMarkers(want wire.IncarnationID, marker, copied markerRead) (markerVerdict, wire.IncarnationID, error) {
	vouches := func(r markerRead) bool { return r.err == nil && r.id == want }
	ioError := func(r markerRead) bool {
		return r.err != nil && !errors.Is(r.err, fs.ErrNotExist) && !errors.Is(r.err, wire.ErrCorrupt)
	}
	switch {
	case vouches(marker) && vouches(copied):
		return markersVouch, "", nil
	case vouches(marker) || vouches(copied):
		return markersOneVouches, "", nil
	case ioError(marker):
		return markersUnreadable, "", marker.err
	case ioError(copied):
		return markersUnreadable, "", copied.err
	case marker.err == nil:
		return markersOther, marker.id, nil
	case copied.err == nil:
		return markersOther, copied.id, nil
	case errors.Is(marker.err, fs.ErrNotExist) && errors.Is(copied.err, fs.ErrNotExist):
		return markersAbsent, "", nil
	}
	return markersDamaged, "", nil
}

// markerRead is what one of a topic directory's two marker files holds.
type markerRead struct {
	id  wire.IncarnationID
	err error // fs.ErrNotExist, wire.ErrCorrupt, or an I/O error
}

func readMarkerFile(files vfs.FS, dir, name string) markerRead {
	b, err := vfs.ReadFile(files, filepath.Join(dir, name), 64)
	if errors.Is(err, vfs.ErrFileTooLarge) {
		return markerRead{err: fmt.Errorf("%w: %w", wire.ErrCorrupt, err)}
	}
	if err != nil {
		return markerRead{err: err}
	}
	id, err := wire.DecodeIncarnationMarker(b)
	return markerRead{id: id, err: err}
}

// readMarker is the incarnation a topic directory belongs to: its
// marker's, or its copy's when the marker is missing, damaged or failing
// reads. Neither existing is fs.ErrNotExist; neither decoding,
// wire.ErrCorrupt; an I/O error with no copy to decode, that error.
func (n *Node) readMarker(dir string) (wire.IncarnationID, error) { return readMarker(n.cfg.FS, dir) }

func readMarker(files vfs.FS, dir string) (wire.IncarnationID, error) {
	marker := readMarkerFile(files, dir, wire.IncarnationFileName)
	if marker.err == nil {
		return marker.id, nil
	}
	copied := readMarkerFile(files, dir, wire.IncarnationCopyFileName)
	switch {
	case copied.err == nil:
		return copied.id, nil
	case !errors.Is(marker.err, fs.ErrNotExist) && !errors.Is(marker.err, wire.ErrCorrupt):
		return "", marker.err // an I/O error, and no copy to say otherwise
	case !errors.Is(copied.err, fs.ErrNotExist):
		return "", copied.err
	}
	return "", marker.err
}

// writeMarker writes a topic directory's marker, then its copy; the
// caller holds the topic's guard.
func (n *Node) writeMarker(dir string, id wire.IncarnationID) error {
	n.vouched.forget(filepath.Base(dir))
	b, err := wire.EncodeIncarnationMarker(id)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(n.cfg.FS, filepath.Join(dir, wire.IncarnationFileName), b); err != nil {
		return err
	}
	return vfs.WriteFileAtomic(n.cfg.FS, filepath.Join(dir, wire.IncarnationCopyFileName), b)
}

// createTopicDir makes a topic's directory durable and stamps it.
func (n *Node) createTopicDir(dir string, rec TopicRecord) error {
	if err := vfs.MkdirAllDurable(n.cfg.FS, dir); err != nil {
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
// durable, the old incarnation's consumer state, dictionaries and
// automatic training state are dropped before any fresh directory exists,
// and both ids are logged at error.
func (n *Node) quarantine(t *supervisor.GuardedTopic, rec TopicRecord, old wire.IncarnationID) error {
	n.vouched.forget(rec.Name)
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
	n.marks.forgetTopic(rec.Name) // the old incarnation's boundaries
	// The old incarnation's dictionaries went with its directory, and its
	// automatic training's count and outcome are not the new one's.
	n.dictionaries.forget(rec.Name)
	n.autoTrainings.forget(rec.Name)
	n.logger.Error("topic directory belongs to a deleted incarnation: quarantined, never served",
		zap.String("topic", rec.Name), zap.String("stale_incarnation", string(old)),
		zap.String("current_incarnation", string(rec.Incarnation)), zap.String("moved_to", stale))
	return nil
}

// recheck runs when a topic's metadata version moves: an open log whose
// incarnation was deleted (or replaced) is retired rather than left
// serving the old data; a retention change reaches the open logs in place
// and is applied at once (retainInPlace).
// Then, on a metastore other nodes change too (a cluster's), the
// directory of a deleted (or replaced) incarnation is purged (or
// quarantined) as the quarantine sweep would (purgeOrphan): a delete
// taken by another node reaches this node's copy at once, not at the next
// sweep.
//
// The record is read under the topic's guard, as an open reads it: read
// before, it may predate a recreate and an open of the new incarnation
// that came in between, and retire that live log (found by the fault
// campaign: the reference workload's calls differed from run to run).
func (n *Node) recheck(topic string) {
	ctx := n.backgroundCtx
	n.watches.wake(topic) // its topic-wide waits look again: a delete, a move, a change of incarnation
	err := n.withTopic(topic, func(t *supervisor.GuardedTopic) error {
		if len(t.Open()) == 0 {
			return nil
		}
		rec, ok, err := n.ms.Topic(ctx, topic)
		if err != nil {
			return err
		}
		marker, err := n.readMarker(filepath.Join(n.topicsDir, topic))
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, wire.ErrCorrupt) {
			return err // the disk's error: never taken for another incarnation
		}
		if !ok || (rec.Incarnation != "" && err == nil && marker != rec.Incarnation) {
			n.logger.Warn("retiring the open logs of a deleted or replaced incarnation", zap.String("topic", topic))
			return t.CloseAll()
		}
		return n.retainInPlace(ctx, t, rec)
	})
	if err != nil {
		n.logger.Warn("metadata recheck", zap.String("topic", topic), zap.Error(err))
	}
	if _, local := n.ms.(*LocalMetastore); local {
		// The embedded metastore changes only through this node, whose
		// delete purges as it goes: nothing is left for the recheck to
		// purge, and a purge racing the delete's own would make the
		// node's file calls differ from run to run (found by the fault
		// campaign, whose call numbering must repeat).
		return
	}
	n.purgeOrphan(ctx, topic)
}
