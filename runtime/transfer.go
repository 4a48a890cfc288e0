package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/narad-io/storage/supervisor"
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

// TransferListing is what a move's source serves: a partition's segment
// files and its boundary.
type TransferListing struct {
	Incarnation   wire.IncarnationID
	Segments      []SegmentFile
	HighWatermark int64
	Known         bool // false: no boundary on disk (an empty hwm file after a crash)
}

// TransferListing lists a partition's segment files and boundary from its
// directory, without opening its log, and refuses a directory whose
// incarnation marker is not the metastore's (storage-engine.txt, "The
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
	err = n.reg.WithTopic(topic, func(t *supervisor.GuardedTopic) error {
		marker, err := n.readMarker(filepath.Join(n.topicsDir, topic))
		if err != nil || marker != rec.Incarnation {
			return fmt.Errorf("%w: %s marker %q (%v), record %q", ErrStaleIncarnation, topic, marker, err, rec.Incarnation)
		}
		info, segments, err := n.peekLocked(t, key)
		if err != nil {
			return err
		}
		out = TransferListing{Incarnation: rec.Incarnation, Segments: segments, HighWatermark: info.HighWatermark, Known: info.Known}
		return nil
	})
	return out, err
}

// InstallFile is one file of a moved partition: a segment, or the hwm file.
type InstallFile struct {
	Name string
	Data []byte
}

// InstallPartition installs a moved partition: the live log (if any) is
// closed between two commits, the files are written and synced into a
// fresh directory beside the partition's, the topic directory is checked
// (or stamped) with the record's incarnation marker, and the new directory
// replaces the old one with a rename made durable. Only segment files and
// the hwm file are accepted; a moved partition's own marker is the
// record's.
func (n *Node) InstallPartition(ctx context.Context, topic string, p int, incarnation wire.IncarnationID, files []InstallFile) error {
	key, err := n.key(topic, p)
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, err := wire.ParseSegmentFileName(f.Name); err != nil && f.Name != wire.HWMFileName {
			return fmt.Errorf("install %s/%d: %q is not a segment or hwm file", topic, p, f.Name)
		}
	}
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return err
	}
	if !ok || p >= rec.Partitions {
		return fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, topic, p)
	}
	if incarnation != rec.Incarnation {
		return fmt.Errorf("%w: installing incarnation %s of %s, the record has %s", ErrStaleIncarnation, incarnation, topic, rec.Incarnation)
	}
	if err := n.reg.CloseLive(key); err != nil {
		return fmt.Errorf("install %s/%d: close the live log: %w", topic, p, err)
	}
	return n.reg.WithTopic(topic, func(t *supervisor.GuardedTopic) error {
		if err := n.checkIncarnation(t, rec); err != nil {
			return err
		}
		dirName, _ := wire.PartitionDirName(p)
		topicDir := filepath.Join(n.topicsDir, topic)
		final := filepath.Join(topicDir, dirName)
		staging := final + ".install"
		fs := n.cfg.FS
		if err := fs.RemoveAll(staging); err != nil {
			return err
		}
		if err := fs.Mkdir(staging); err != nil {
			return fmt.Errorf("install %s/%d: %w", topic, p, err)
		}
		for _, f := range files {
			if err := writeSynced(n, filepath.Join(staging, f.Name), f.Data); err != nil {
				return fmt.Errorf("install %s/%d: %w", topic, p, err)
			}
		}
		if err := fs.SyncDir(staging); err != nil {
			return err
		}
		if err := fs.RemoveAll(final); err != nil {
			return err
		}
		if err := fs.Rename(staging, final); err != nil {
			return fmt.Errorf("install %s/%d: %w", topic, p, err)
		}
		return fs.SyncDir(topicDir)
	})
}

func writeSynced(n *Node, path string, data []byte) error {
	f, err := n.cfg.FS.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
