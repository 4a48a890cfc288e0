package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
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
	// Dictionaries are the topic's dictionary files (Base unused), which
	// the partition's frames may name: every one the topic directory
	// holds, each written once and never changed.
	Dictionaries []SegmentFile
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
		out.Dictionaries, err = n.listDictionaryFiles(topic)
		return err
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
	_, dictErr := wire.ParseDictionaryFileName(name)
	if _, consumer := consumerFileLimit(name); !consumer && dictErr != nil {
		if _, err := wire.ParseSegmentFileName(name); err != nil {
			return nil, fmt.Errorf("%w: %q is not a segment, consumer progress or dictionary file", ErrPartitionNotFound, name)
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
		if dictErr == nil {
			dir = "" // a dictionary is the topic's: beside the partitions
		}
		f, err = n.cfg.FS.OpenFile(filepath.Join(n.topicsDir, topic, dir, name), os.O_RDONLY)
		return err
	})
	return f, err
}

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
