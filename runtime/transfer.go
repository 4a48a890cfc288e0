package runtime

import (
	"context"
	"errors"
	"fmt"
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
		out.Cursors, err = n.listCursors(key)
		return err
	})
	return out, err
}
