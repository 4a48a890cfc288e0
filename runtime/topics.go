package runtime

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// ErrTopicExists: a topic of that name exists with other settings.
var ErrTopicExists = errors.New("runtime: topic exists")

// CreateTopic creates a topic; an identical existing one is returned with
// created false, a different one is ErrTopicExists. Its partitions are
// opened lazily, on first use.
func (n *Node) CreateTopic(ctx context.Context, name string, partitions int, retention Retention) (rec TopicRecord, created bool, err error) {
	if err := wire.ValidateTopicName(name); err != nil {
		return rec, false, err
	}
	if err := ValidateTopicSettings(partitions, retention); err != nil {
		return rec, false, fmt.Errorf("runtime: topic %s: %w", name, err)
	}
	rec, created, err = n.ms.CreateTopic(ctx, name, partitions, retention)
	if err != nil {
		return rec, false, err
	}
	if !created && (rec.Partitions != partitions || rec.Retention() != retention) {
		return rec, false, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	if created {
		n.topicMetrics.add(name)
		n.logger.Info("topic created", zap.String("topic", name), zap.String("incarnation", string(rec.Incarnation)),
			zap.Int("partitions", partitions), zap.Int64("retention_ms", retention.Ms), zap.Int64("retention_bytes", retention.Bytes))
	}
	return rec, created, nil
}

// DeleteTopic deletes a topic and purges its data: under the topic's
// guard its open logs are closed (no produce gate: a deleted topic has no
// valid commit left to protect), its consumer state dropped and its
// directory removed, durably. A topic whose record the metastore refuses
// (RefusedTopicDeleter) is deleted too: deleteRefusedTopic.
func (n *Node) DeleteTopic(ctx context.Context, name string) error {
	if err := wire.ValidateTopicName(name); err != nil {
		return err
	}
	rec, ok, err := n.ms.Topic(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return n.deleteRefusedTopic(ctx, name)
	}
	if err := n.ms.DeleteTopic(ctx, name); err != nil {
		return err
	}
	n.logger.Info("topic deleted", zap.String("topic", name), zap.String("incarnation", string(rec.Incarnation)))
	return n.purge(rec)
}

// deleteRefusedTopic is DeleteTopic for a name the metastore shows no
// record of: ErrTopicNotFound, unless the metastore holds one it refuses.
// The directory's marker is read before that record is deleted: while it
// stands, no node can create the name again (the create finds a record)
// or stamp the directory (the open finds no topic), so what the marker
// names then is an incarnation the delete ends, never a recreate's. Read
// after, it could be a recreate's that landed in between (found by
// review). The directory is then purged as that incarnation, or, with no
// marker that reads, only while it still has none (a record without an
// incarnation id rewritten by hand meanwhile and opened here is purged
// with it, as purge does for such a record). A marker that cannot be
// read for the disk's error fails the delete before anything changes. A
// purge that does not run here (a close, a crash, the context's end, the
// other nodes' directories) is the orphan sweep's and the change feed's
// recheck (purgeOrphan), marked or not.
func (n *Node) deleteRefusedTopic(ctx context.Context, name string) error {
	d, ok := n.ms.(RefusedTopicDeleter)
	if !ok {
		return fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	marker, markerErr := n.readMarker(filepath.Join(n.topicsDir, name))
	if markerErr != nil && !unmarked(markerErr) {
		return fmt.Errorf("delete %s: %w", name, markerErr)
	}
	deleted, err := d.DeleteRefusedTopic(ctx, name)
	if err != nil {
		return err
	}
	if !deleted {
		return fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	n.logger.Warn("deleted a topic record the metastore refused", zap.String("topic", name), zap.String("incarnation_on_disk", string(marker)))
	if markerErr == nil {
		return n.purge(TopicRecord{Name: name, Incarnation: marker})
	}
	return n.purgeUnmarked(name)
}

// purgeUnmarked purges a deleted topic's directory that no marker named
// when its record was deleted, unless one names an incarnation now (a
// recreate's, stamped since).
func (n *Node) purgeUnmarked(name string) error {
	return n.withTopic(name, func(t *supervisor.GuardedTopic) error {
		_, err := n.readMarker(filepath.Join(n.topicsDir, name))
		switch {
		case err == nil:
			return nil
		case unmarked(err):
			return n.purgeLocked(t, TopicRecord{Name: name})
		}
		return fmt.Errorf("purge %s: %w", name, err)
	})
}

// purge removes a deleted incarnation's directory, unless the name now
// belongs to a newer incarnation (a recreate won the race): then the
// directory is the new one's, and the open path quarantines any leftover.
func (n *Node) purge(deleted TopicRecord) error {
	return n.withTopic(deleted.Name, func(t *supervisor.GuardedTopic) error {
		marker, err := n.readMarker(filepath.Join(n.topicsDir, deleted.Name))
		switch {
		case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, wire.ErrCorrupt):
			// The disk's error, never taken for the deleted incarnation's
			// marker: the directory may be a recreate's, holding acked
			// records. The quarantine sweep or the next open settles it.
			return fmt.Errorf("purge %s: %w", deleted.Name, err)
		case err == nil && marker != deleted.Incarnation:
			// A newer incarnation's; or, the deleted record having no
			// id (which stamps no marker), another incarnation's: a
			// recreate's stamped since (found by review), or an older
			// one's, which the orphan sweep purges once no record names it.
			return nil
		}
		// The deleted incarnation's, or with neither marker decoding still
		// its: a recreate that had opened it under this guard would have
		// stamped markers that decode.
		return n.purgeLocked(t, deleted)
	})
}

// purgeLocked closes a deleted incarnation's logs (no produce gate: it has
// no valid commit left), drops its consumer state and removes its
// directory durably; the caller holds the topic's guard.
func (n *Node) purgeLocked(t *supervisor.GuardedTopic, deleted TopicRecord) error {
	n.vouched.forget(deleted.Name)
	if err := t.CloseAll(); err != nil {
		n.logger.Warn("closing a deleted topic's logs: " + err.Error())
	}
	n.marks.forgetTopic(deleted.Name)
	n.topicMetrics.remove(deleted.Name)
	n.dropConsumerState(deleted.Name, deleted.Incarnation)
	n.dictionaries.forget(deleted.Name)
	n.autoTrainings.forget(deleted.Name)
	dir := filepath.Join(n.topicsDir, deleted.Name)
	id := deleted.Incarnation
	if id == "" {
		// No incarnation to name the leftover by (a record without an id,
		// a directory without a marker): a fresh id no record holds, so
		// the quarantine sweep reclaims a leftover all the same.
		id, _ = wire.NewIncarnationID(rand.Reader)
		n.logger.Info("purging a topic directory no incarnation names, under a fresh id", zap.String("topic", deleted.Name), zap.String("stale_id", string(id)))
	}
	if stale, err := wire.StaleDirName(deleted.Name, id); err == nil {
		// Out of the topic's name first, durably: the unlinks of a
		// RemoveAll go in directory order, and one cut short (a crash)
		// must never leave the deleted data under the live name without
		// its markers, where a recreate would adopt it. The quarantine
		// sweep finishes a leftover.
		stalePath := filepath.Join(n.topicsDir, stale)
		if err := n.cfg.FS.RemoveAll(stalePath); err != nil { // an earlier purge's leftover
			return fmt.Errorf("purge %s: %w", deleted.Name, err)
		}
		if err := n.cfg.FS.Rename(dir, stalePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("purge %s: %w", deleted.Name, err)
		}
		if err := n.cfg.FS.SyncDir(n.topicsDir); err != nil {
			return fmt.Errorf("purge %s: %w", deleted.Name, err)
		}
		dir = stalePath
	}
	if err := n.cfg.FS.RemoveAll(dir); err != nil {
		return fmt.Errorf("purge %s: %w", deleted.Name, err)
	}
	return n.cfg.FS.SyncDir(n.topicsDir)
}

// SetRetention changes a topic's retention. This node, the one that runs
// the change, sets the new bounds on its open logs of the topic in place
// before it returns, and its reaper applies them at once (retainInPlace):
// whether or not anything is written to them again.
func (n *Node) SetRetention(ctx context.Context, name string, retention Retention) (TopicRecord, error) {
	return n.UpdateRetention(ctx, name, func(Retention) (Retention, error) { return retention, nil })
}

// ValidateTopicSettings checks what a topic record may hold: 1 to
// wire.MaxPartitions partitions (a partition's directory name holds five
// digits), no negative retention bound and an age bound of at most
// MaxRetentionMs. Every writer of a record
// checks it, and so does a metastore reading one it did not write.
func ValidateTopicSettings(partitions int, retention Retention) error {
	if partitions < 1 || partitions > wire.MaxPartitions || !retention.inRange() {
		return fmt.Errorf("%d partitions, retention %+v: out of range", partitions, retention)
	}
	return nil
}

// ErrBadRetention: retention bounds out of range (negative, or an age
// over MaxRetentionMs).
var ErrBadRetention = errors.New("runtime: retention bound out of range")

// UpdateRetention is SetRetention with the new bounds made from the
// current ones by change, atomically in the metastore: two updates of
// different bounds at once both land. Bounds out of range are
// ErrBadRetention, and change nothing.
func (n *Node) UpdateRetention(ctx context.Context, name string, change func(Retention) (Retention, error)) (TopicRecord, error) {
	if err := wire.ValidateTopicName(name); err != nil {
		return TopicRecord{}, err
	}
	rec, err := n.ms.UpdateRetention(ctx, name, func(cur Retention) (Retention, error) {
		r, err := change(cur)
		if err == nil && !r.inRange() {
			err = fmt.Errorf("%w: %+v", ErrBadRetention, r)
		}
		return r, err
	})
	if err != nil {
		return rec, err
	}
	n.logger.Info("topic retention changed", zap.String("topic", name), zap.Int64("retention_ms", rec.RetentionMs), zap.Int64("retention_bytes", rec.RetentionBytes))
	// In place, never by closing the logs: a closed log is swept only by
	// the cold walk, minutes later if at all, and the change waited for a
	// produce to reopen it (found by review). The change feed's recheck
	// does the same again; both read the record under the topic's guard.
	err = n.withTopic(name, func(t *supervisor.GuardedTopic) error {
		if len(t.Open()) == 0 {
			return nil
		}
		cur, ok, err := n.ms.Topic(ctx, name)
		if err != nil || !ok {
			return err // deleted meanwhile: its delete closed the logs
		}
		return n.retainInPlace(ctx, t, cur)
	})
	return rec, err
}

// PartitionInfo describes one partition.
type PartitionInfo struct {
	Partition     int
	StartOffset   int64
	HighWatermark int64
	Known         bool // false: closed after a crash, no boundary on disk
	Segments      int
	Bytes         int64
}

// Describe describes a topic's partitions without opening any: an open
// log answers from memory, a closed one from its directory and hwm file.
func (n *Node) Describe(ctx context.Context, name string) (TopicRecord, []PartitionInfo, error) {
	if err := wire.ValidateTopicName(name); err != nil {
		return TopicRecord{}, nil, err
	}
	rec, ok, err := n.ms.Topic(ctx, name)
	if err != nil {
		return rec, nil, err
	}
	if !ok {
		return rec, nil, fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	infos := make([]PartitionInfo, 0, rec.Partitions)
	for p := range rec.Partitions {
		info, err := n.peek(supervisor.Key{Topic: name, Partition: p})
		if err != nil {
			return rec, nil, err
		}
		infos = append(infos, info)
	}
	return rec, infos, nil
}

// PeekHighWatermark answers a partition's boundary without opening it,
// after waiting for a close in progress. known is false when the boundary
// is not on disk (an empty hwm file after a crash, with records present):
// never taken as 0.
func (n *Node) PeekHighWatermark(topic string, p int) (hwm int64, known bool, err error) {
	key, err := n.key(topic, p)
	if err != nil {
		return 0, false, err
	}
	info, err := n.peek(key)
	return info.HighWatermark, info.Known, err
}

// peek reads a partition's state under its topic's guard, so a close in
// progress has finished (and written the hwm file) first.
func (n *Node) peek(key supervisor.Key) (info PartitionInfo, err error) {
	err = n.withTopic(key.Topic, func(t *supervisor.GuardedTopic) error {
		info, _, err = n.peekLocked(t, key)
		return err
	})
	return info, err
}

// peekLocked reads a partition's directory and boundary; the caller holds
// the topic's guard.
func (n *Node) peekLocked(t *supervisor.GuardedTopic, key supervisor.Key) (info PartitionInfo, segments []SegmentFile, err error) {
	info.Partition = key.Partition
	if err := n.settleBeforeOpen(key); err != nil {
		return info, nil, err // never describe a half-installed partition
	}
	dirName, _ := wire.PartitionDirName(key.Partition)
	dir := filepath.Join(n.topicsDir, key.Topic, dirName)
	entries, err := n.cfg.FS.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return info, nil, err
	}
	newest := int64(0)
	for _, e := range entries {
		base, err := wire.ParseSegmentFileName(e.Name)
		if err != nil {
			continue
		}
		fi, err := n.cfg.FS.Stat(filepath.Join(dir, e.Name))
		if errors.Is(err, fs.ErrNotExist) {
			// A sweep of the open log unlinked it after the listing: the
			// reaper's sweep needs no topic guard. It is deleted.
			continue
		}
		if err != nil {
			return info, nil, err
		}
		if len(segments) == 0 {
			info.StartOffset = base
		}
		segments = append(segments, SegmentFile{Name: e.Name, Base: base, Size: fi.Size})
		info.Bytes += fi.Size
		newest = base
	}
	info.Segments = len(segments)
	if l, ok := t.Lookup(key.Partition); ok {
		info.StartOffset, info.HighWatermark, info.Known = l.StartOffset(), l.HighWatermark(), true
		return info, segments, nil
	}
	b, err := vfs.ReadFile(n.cfg.FS, filepath.Join(dir, wire.HWMFileName), 64)
	if err == nil {
		if v, present, err := wire.DecodeOffsetFile(b); err == nil && present {
			info.HighWatermark, info.Known = v, true
			return info, segments, nil
		}
	}
	if info.Bytes == 0 {
		// No record bytes: the boundary is the newest segment's name.
		info.HighWatermark, info.Known = newest, true
	}
	return info, segments, nil
}

// owned lists the partitions of a topic the metastore assigns this node:
// on a node alone, every one.
func (n *Node) owned(ctx context.Context, rec TopicRecord) ([]int, error) {
	out := make([]int, 0, rec.Partitions)
	for p := range rec.Partitions {
		mine, err := n.ms.Assigned(ctx, rec.Name, p)
		if err != nil {
			return nil, err
		}
		if mine {
			out = append(out, p)
		}
	}
	return out, nil
}

// PartitionRef names one partition this node owns.
type PartitionRef struct {
	Topic     string
	Partition int
	Open      bool // its log is open now
}

// Partitions lists every partition the metastore assigns this node, in
// topic and partition order, and whether each is open. It opens nothing.
func (n *Node) Partitions(ctx context.Context) ([]PartitionRef, error) {
	topics, err := n.ms.Topics(ctx)
	if err != nil {
		return nil, err
	}
	var out []PartitionRef
	for _, t := range topics {
		for p := range t.Partitions {
			assigned, err := n.ms.Assigned(ctx, t.Name, p)
			if err != nil {
				return nil, err
			}
			if !assigned {
				continue
			}
			_, open := n.reg.Lookup(supervisor.Key{Topic: t.Name, Partition: p})
			out = append(out, PartitionRef{Topic: t.Name, Partition: p, Open: open})
		}
	}
	return out, nil
}
