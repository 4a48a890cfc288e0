package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"sync"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// ErrCursorNotFound: the topic has no fan-out cursor of that name.
var ErrCursorNotFound = errors.New("runtime: cursor not found")

// CursorStart is where a new cursor starts on each partition.
type CursorStart int

const (
	// CursorEarliest starts at each partition's first record.
	CursorEarliest CursorStart = iota
	// CursorLatest starts at each partition's high watermark: the cursor
	// reads only what commits after its creation.
	CursorLatest
)

// CursorPosition is a cursor's place in one partition.
type CursorPosition struct {
	Partition     int
	Position      int64 // the next offset the cursor reads
	HighWatermark int64
	Lag           int64 // records committed and not yet read through the cursor
}

// CursorRead is what a read through a cursor returned.
type CursorRead struct {
	partition.ReadResult
	// Skipped counts the records of damaged frames the read stepped over
	// (counted in narad_fanout_child_dropped_messages); they are never
	// served.
	Skipped int64
}

// cursor is one fan-out cursor's position in one partition (docs/design.md,
// "Fan-out cursors"). Its file, cursor.<name> in the partition directory,
// holds the position in two checksummed slots (wire.DecodeCursorFile),
// written out on the committer's cadence and at Close (cursor_file.go).
//
// Invariants, under mu: written is the position the file holds (its last
// write-out; -1 unknown); unless replace is set, slot is the file's valid
// slot holding sequence seq, the newest, and a write-out goes to the other
// slot with seq+1 (replace: the file has no slot to trust, an older
// format or damage, and is replaced whole); once dropped (the topic's incarnation deleted,
// the cursor deleted, the partition installed anew, the node closed)
// nothing is written for it again. A cursor's state lives in memory from
// its first touch until then, whether its log is open or not; it holds no
// descriptor (each write-out opens the file), so cursors stay outside the
// open-log budget's count.
//
// Lock order: reading (held across a read through the cursor, which may
// open the log under the topic's guard), then the topic's guard, then mu.
// mu is held only to read or store the position and write it out; what
// drops a cursor (under the guard) takes mu, never reading.
type cursor struct {
	key         supervisor.Key
	name        string
	path        string
	incarnation wire.IncarnationID

	reading sync.Mutex // one read through the cursor at a time

	mu      sync.Mutex
	pos     int64
	written int64
	seq     uint64
	slot    int
	replace bool
	dropped bool
}

type cursorKey struct {
	key  supervisor.Key
	name string
}

// cursors is the node's fan-out cursors in memory, and their metric.
type cursors struct {
	n       *Node
	mu      sync.Mutex // guards by; a leaf
	by      map[cursorKey]*cursor
	dropped *prometheus.CounterVec // narad_fanout_child_dropped_messages{cursor}
}

func newCursors(n *Node, reg prometheus.Registerer) *cursors {
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "narad_fanout_child_dropped_messages",
		Help: "Records of damaged frames a fan-out cursor stepped over, never served, by topic and cursor."}, []string{"topic", "cursor"})
	return &cursors{n: n, by: map[cursorKey]*cursor{}, dropped: promshare.Register(reg, dropped)}
}

func (cs *cursors) lookup(ck cursorKey) *cursor {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.by[ck]; c != nil && !c.dropped {
		return c
	}
	return nil
}

// forget drops every cursor state match selects: from memory, with
// nothing written for it again.
func (cs *cursors) forget(match func(cursorKey) bool) {
	cs.mu.Lock()
	var gone []*cursor
	for ck, c := range cs.by {
		if match(ck) {
			gone = append(gone, c)
			delete(cs.by, ck)
		}
	}
	cs.mu.Unlock()
	for _, c := range gone {
		c.mu.Lock()
		c.drop()
		c.mu.Unlock()
	}
}

// ofPartition selects a partition's cursors; ofTopic a topic's.
func ofPartition(key supervisor.Key) func(cursorKey) bool {
	return func(ck cursorKey) bool { return ck.key == key }
}

func ofTopic(topic string) func(cursorKey) bool {
	return func(ck cursorKey) bool { return ck.key.Topic == topic }
}

// close writes every cursor out and drops it, each under its lock, so no
// position moved after its write-out is taken for written: the node is
// closing. It returns the write-outs' errors.
func (cs *cursors) close() []error {
	cs.mu.Lock()
	all := cursorsInOrder(cs.by)
	cs.by = map[cursorKey]*cursor{}
	cs.mu.Unlock()
	var errs []error
	for _, c := range all {
		c.mu.Lock()
		if err := c.writeOut(cs.n.cfg.FS); err != nil {
			errs = append(errs, fmt.Errorf("cursor %q of %s/%d: %w", c.name, c.key.Topic, c.key.Partition, err))
		}
		c.drop()
		c.mu.Unlock()
	}
	return errs
}

// drop marks c gone; the caller holds c.mu.
func (c *cursor) drop() { c.dropped = true }

// writeOutAll writes out every cursor whose position moved; a failure is
// logged and retried at the next pass.
func (cs *cursors) writeOutAll() {
	cs.mu.Lock()
	all := cursorsInOrder(cs.by)
	cs.mu.Unlock()
	for _, c := range all {
		c.mu.Lock()
		err := c.writeOut(cs.n.cfg.FS)
		c.mu.Unlock()
		if err != nil {
			cs.n.logger.Warn("cursor position write-out", zap.String("topic", c.key.Topic), zap.Int("partition", c.key.Partition),
				zap.String("cursor", c.name), zap.Error(err))
		}
	}
}

// cursorOf returns a partition's cursor, loading its position file on
// first touch, as consumer progress is loaded: the partition's log is
// opened first (its open settles an unfinished install and admits the
// directory: incarnation check, quarantine), then, under the topic's
// guard, the log must still be the open one and the directory must carry
// the record's incarnation. With create, a cursor the partition lacks (or
// whose file a crash left empty) is made at start: its file written and
// synced, and its directory synced, before it exists. Without, a missing
// file is ErrCursorNotFound. A position above the high watermark can only
// be damage and is not trusted: the cursor starts again from the first
// record (it may read again, never skip).
func (n *Node) cursorOf(ctx context.Context, key supervisor.Key, name string, create bool, start CursorStart) (c *cursor, created bool, err error) {
	file, err := wire.CursorFileName(name)
	if err != nil {
		return nil, false, err
	}
	ck := cursorKey{key, name}
	for attempt := 0; attempt < 3; attempt++ {
		rec, ok, err := n.ms.Topic(ctx, key.Topic)
		if err != nil {
			return nil, false, err
		}
		if !ok || key.Partition >= rec.Partitions {
			return nil, false, fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, key.Topic, key.Partition)
		}
		if c := n.cursors.lookup(ck); c != nil && c.incarnation == rec.Incarnation {
			return c, false, nil
		}
		l, err := n.log(ctx, key)
		if err != nil {
			return nil, false, err
		}
		stale := false
		err = n.withTopic(key.Topic, func(t *supervisor.GuardedTopic) error {
			if cur, ok := t.Lookup(key.Partition); !ok || cur != l {
				stale = true // closed or replaced meanwhile: start over
				return nil
			}
			if rec.Incarnation != "" { // a record without an id (from before ids) has nothing to check
				if marker, err := n.readMarker(filepath.Join(n.topicsDir, key.Topic)); err != nil || marker != rec.Incarnation {
					// The record moved on while this log is still open;
					// the recheck retires it.
					return fmt.Errorf("%w: %s was deleted or recreated", ErrTopicNotFound, key.Topic)
				}
			}
			if c = n.cursors.lookup(ck); c != nil && c.incarnation == rec.Incarnation {
				return nil
			}
			dirName, _ := wire.PartitionDirName(key.Partition)
			dir := filepath.Join(n.topicsDir, key.Topic, dirName)
			c = &cursor{key: key, name: name, path: filepath.Join(dir, file), incarnation: rec.Incarnation}
			// Another incarnation's cursor goes first: a write-out of it
			// in flight (it holds no guard) ends before the file is read.
			n.cursors.forget(func(x cursorKey) bool { return x == ck })
			b, err := vfs.ReadFile(n.cfg.FS, c.path, wire.CursorFileSize)
			if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, vfs.ErrFileTooLarge) {
				return fmt.Errorf("cursor %q of %s/%d: %w", name, key.Topic, key.Partition, err)
			}
			var st wire.CursorState
			derr := err // a file too large is damage
			if err == nil {
				st, derr = wire.DecodeCursorFile(b)
			}
			pos, present := st.Slot.Position, st.Present
			hwm := l.HighWatermark()
			switch {
			case (errors.Is(err, fs.ErrNotExist) || (derr == nil && !present)) && create:
				// Not made, or made by a create a crash cut short.
				c.pos = l.StartOffset()
				if start == CursorLatest {
					c.pos = hwm
				}
				if err := n.createCursorFile(dir, c); err != nil {
					return fmt.Errorf("cursor %q of %s/%d: %w", name, key.Topic, key.Partition, err)
				}
				created = true
			case errors.Is(err, fs.ErrNotExist):
				return fmt.Errorf("%w: %q on %s/%d", ErrCursorNotFound, name, key.Topic, key.Partition)
			default:
				if derr == nil && pos > hwm {
					derr = fmt.Errorf("position %d is above the high watermark %d", pos, hwm)
				}
				if derr != nil {
					n.logger.Warn("cursor position file damaged: the cursor starts again from the partition's first record",
						zap.String("topic", key.Topic), zap.Int("partition", key.Partition), zap.String("cursor", name), zap.Error(derr))
					present = false
				}
				if present {
					c.pos = pos
				}
				// An older-format, empty or damaged file is replaced
				// whole at the next write-out (as one whose sequence has
				// no next is, at its write-out); a valid one gets its
				// other slot.
				c.seq, c.slot = st.Slot.Sequence, st.Index
				c.replace = !present || st.Legacy
				c.written = -1 // written out at the next pass: the file may not hold pos
			}
			n.cursors.mu.Lock()
			n.cursors.by[ck] = c
			n.cursors.mu.Unlock()
			n.cursors.dropped.WithLabelValues(key.Topic, name)
			return nil
		})
		if err != nil {
			return nil, false, err
		}
		if !stale {
			return c, created, nil
		}
	}
	return nil, false, fmt.Errorf("%w: %s/%d kept closing under a cursor's load", partition.ErrLogClosed, key.Topic, key.Partition)
}

// CreateCursor makes a fan-out cursor on every partition of topic this
// node owns (every partition, alone), starting at each one's first record
// or its high watermark; created is false when every partition had it
// already (positions are left alone).
func (n *Node) CreateCursor(ctx context.Context, topic, name string, start CursorStart) (created bool, err error) {
	rec, err := n.cursorTopic(ctx, topic, name)
	if err != nil {
		return false, err
	}
	owned, err := n.owned(ctx, rec)
	if err != nil {
		return false, err
	}
	for _, p := range owned {
		_, made, err := n.cursorOf(ctx, supervisor.Key{Topic: topic, Partition: p}, name, true, start)
		if err != nil {
			return created, err
		}
		created = created || made
	}
	return created, nil
}

// cursorTopic checks the names and returns the topic's record.
func (n *Node) cursorTopic(ctx context.Context, topic, name string) (TopicRecord, error) {
	if n.closed.Load() {
		return TopicRecord{}, ErrNodeClosed
	}
	if err := wire.ValidateTopicName(topic); err != nil {
		return TopicRecord{}, err
	}
	if err := wire.ValidateCursorName(name); err != nil {
		return TopicRecord{}, err
	}
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return TopicRecord{}, err
	}
	if !ok {
		return TopicRecord{}, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	return rec, nil
}

// Cursor returns a cursor's position, high watermark and lag on every
// partition of its topic this node owns; ErrCursorNotFound if none has
// it.
func (n *Node) Cursor(ctx context.Context, topic, name string) ([]CursorPosition, error) {
	rec, err := n.cursorTopic(ctx, topic, name)
	if err != nil {
		return nil, err
	}
	owned, err := n.owned(ctx, rec)
	if err != nil {
		return nil, err
	}
	var out []CursorPosition
	for _, p := range owned {
		c, _, err := n.cursorOf(ctx, supervisor.Key{Topic: topic, Partition: p}, name, false, 0)
		if errors.Is(err, ErrCursorNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		hwm, _, err := n.PeekHighWatermark(topic, p)
		if err != nil {
			return nil, err
		}
		pos, err := n.cursorPosition(c)
		if err != nil {
			return nil, err
		}
		out = append(out, CursorPosition{Partition: p, Position: pos, HighWatermark: hwm, Lag: max(hwm-pos, 0)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %q on topic %s", ErrCursorNotFound, name, topic)
	}
	return out, nil
}

// DeleteCursor removes a cursor from every partition of its topic this
// node owns: its state from memory and its files from disk (each
// directory synced).
func (n *Node) DeleteCursor(ctx context.Context, topic, name string) error {
	rec, err := n.cursorTopic(ctx, topic, name)
	if err != nil {
		return err
	}
	owned, err := n.owned(ctx, rec)
	if err != nil {
		return err
	}
	file, _ := wire.CursorFileName(name)
	tmp, _ := wire.CursorTempFileName(name)
	found := false
	for _, p := range owned {
		key := supervisor.Key{Topic: topic, Partition: p}
		err := n.withTopic(topic, func(*supervisor.GuardedTopic) error {
			if err := n.settleBeforeOpen(key); err != nil {
				return err // never delete from a half-installed partition
			}
			n.cursors.forget(func(ck cursorKey) bool { return ck == cursorKey{key, name} })
			dirName, _ := wire.PartitionDirName(p)
			dir := filepath.Join(n.topicsDir, topic, dirName)
			if err := n.cfg.FS.Remove(filepath.Join(dir, tmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err // a replace's leftover: removed with the cursor
			}
			err := n.cfg.FS.Remove(filepath.Join(dir, file))
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			found = true
			return n.cfg.FS.SyncDir(dir)
		})
		if err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("%w: %q on topic %s", ErrCursorNotFound, name, topic)
	}
	n.cursors.dropped.DeleteLabelValues(topic, name)
	return nil
}

// ReadCursor reads a partition's records from the cursor's position and,
// with advance, moves the cursor past them (written out on the
// committer's cadence). A damaged frame is stepped over, never served
// (Skipped counts its records; an advancing read counts them in
// narad_fanout_child_dropped_messages and logs a warning); records
// retention deleted are stepped over to the start. Reads through one
// cursor of one partition run one at a time; a commit made during a read
// wins over the read's advance.
func (n *Node) ReadCursor(ctx context.Context, topic, name string, p, maxRecords, maxBytes int, advance bool) (CursorRead, error) {
	if _, err := n.cursorTopic(ctx, topic, name); err != nil {
		return CursorRead{}, err
	}
	c, _, err := n.cursorOf(ctx, supervisor.Key{Topic: topic, Partition: p}, name, false, 0)
	if err != nil {
		return CursorRead{}, err
	}
	c.reading.Lock()
	defer c.reading.Unlock()
	from, err := n.cursorPosition(c)
	if err != nil {
		return CursorRead{}, err
	}
	var out CursorRead
	pos := from
	for {
		res, err := n.Read(ctx, topic, p, pos, maxRecords, maxBytes)
		var unreadable *partition.UnreadableError
		switch {
		case errors.As(err, &unreadable) && unreadable.Next > pos:
			out.Skipped += unreadable.Next - pos
			if advance {
				n.cursors.dropped.WithLabelValues(topic, name).Add(float64(unreadable.Next - pos))
				n.logger.Warn("fan-out cursor stepped over permanently unreadable records", zap.String("topic", topic),
					zap.Int("partition", p), zap.String("cursor", name), zap.Int64("from_offset", pos), zap.Int64("to_offset", unreadable.Next-1))
			}
			pos = unreadable.Next
			continue
		case errors.Is(err, partition.ErrOffsetDeleted):
			l, lerr := n.Log(ctx, topic, p)
			if lerr != nil {
				return CursorRead{}, lerr
			}
			if start := l.StartOffset(); start > pos {
				pos = start
				continue
			}
			return CursorRead{}, err
		case err != nil:
			return CursorRead{}, err
		}
		out.ReadResult = res
		break
	}
	if advance {
		c.mu.Lock()
		if !c.dropped && c.pos == from {
			c.pos = out.Next
		}
		c.mu.Unlock()
	}
	return out, nil
}

// cursorPosition is c's position; a dropped cursor is gone (the node
// closing, the cursor deleted, its incarnation or partition replaced).
func (n *Node) cursorPosition(c *cursor) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		return 0, n.closedOr(fmt.Errorf("%w: %q on %s/%d (deleted or replaced meanwhile)", ErrCursorNotFound, c.name, c.key.Topic, c.key.Partition))
	}
	return c.pos, nil
}

// CommitCursor sets a cursor's position in one partition (at most its
// high watermark), written out on the committer's cadence.
func (n *Node) CommitCursor(ctx context.Context, topic, name string, p int, offset int64) error {
	if _, err := n.cursorTopic(ctx, topic, name); err != nil {
		return err
	}
	c, _, err := n.cursorOf(ctx, supervisor.Key{Topic: topic, Partition: p}, name, false, 0)
	if err != nil {
		return err
	}
	hwm, err := n.HighWatermark(ctx, topic, p)
	if err != nil {
		return err
	}
	if offset < 0 || offset > hwm {
		return fmt.Errorf("%w: cursor position %d, high watermark %d", partition.ErrBeyondHighWatermark, offset, hwm)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		return n.closedOr(fmt.Errorf("%w: %q on %s/%d", ErrCursorNotFound, name, topic, p))
	}
	c.pos = offset
	return nil
}

// closedOr is ErrNodeClosed once the node is closing, else err.
func (n *Node) closedOr(err error) error {
	if n.closed.Load() {
		return ErrNodeClosed
	}
	return err
}

// discover exposes the dropped-records series of every cursor a
// partition directory holds, at zero, so it exists from startup.
func (cs *cursors) discover(topicDir string, p int) {
	dirName, _ := wire.PartitionDirName(p)
	files, _ := cs.n.cursorFiles(filepath.Join(topicDir, dirName))
	for _, f := range files {
		name, _ := wire.ParseCursorFileName(f)
		cs.dropped.WithLabelValues(filepath.Base(topicDir), name)
	}
}

// listCursors returns a partition's cursor positions for a transfer
// listing, each written out first; the caller holds the topic's guard.
func (n *Node) listCursors(key supervisor.Key) ([]CursorFile, error) {
	dirName, _ := wire.PartitionDirName(key.Partition)
	dir := filepath.Join(n.topicsDir, key.Topic, dirName)
	files, err := n.cursorFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []CursorFile
	for _, file := range files {
		name, _ := wire.ParseCursorFileName(file)
		if c := n.cursors.lookup(cursorKey{key, name}); c != nil {
			c.mu.Lock()
			err := c.writeOut(n.cfg.FS)
			c.mu.Unlock()
			if err != nil {
				return nil, fmt.Errorf("cursor %q of %s/%d: %w", name, key.Topic, key.Partition, err)
			}
		}
		b, err := vfs.ReadFile(n.cfg.FS, filepath.Join(dir, file), wire.CursorFileSize)
		if err != nil && !errors.Is(err, vfs.ErrFileTooLarge) {
			return nil, err
		}
		var pos int64
		if st, derr := wire.DecodeCursorFile(b); err == nil && derr == nil {
			pos = st.Slot.Position
		} // else damaged: the receiver's cursor starts again from the first record
		out = append(out, CursorFile{Name: file, Position: pos})
	}
	return out, nil
}

// cursorFiles lists the cursor position files of a partition directory,
// sorted; the caller holds the topic's guard.
func (n *Node) cursorFiles(dir string) ([]string, error) {
	entries, err := n.cfg.FS.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if _, ok := wire.ParseCursorFileName(e.Name); ok {
			out = append(out, e.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// cursorsInOrder lists cursors by partition, then name: their write-outs
// go in the same order every time (a simulation replays a run's file
// calls exactly; a map's order would differ from run to run).
func cursorsInOrder(by map[cursorKey]*cursor) []*cursor {
	keys := make([]cursorKey, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.key != b.key {
			return a.key.Topic < b.key.Topic || (a.key.Topic == b.key.Topic && a.key.Partition < b.key.Partition)
		}
		return a.name < b.name
	})
	out := make([]*cursor, len(keys))
	for i, k := range keys {
		out[i] = by[k]
	}
	return out
}
