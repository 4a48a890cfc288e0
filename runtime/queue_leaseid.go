package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// leaseIDBlock is how many lease ids one write of a partition's floor
// reserves: a partition's consume writes consumer.lease once per this many
// of its leases.
const leaseIDBlock = 1 << 20

// leaseIDs hands out one partition's lease ids (docs/design.md, "Queue
// consume"): an id is never given twice for a partition, in this process
// or another, on this node or another one the partition moved to.
// consumer.lease holds a floor no id given for the partition exceeds,
// raised durably before an id above it is given; it moves with the
// partition. A queue reads it once (its first lease) and starts above it
// and above the clock in microseconds. The clock alone starts a partition
// without the file, or with a damaged one, and only on a best effort: a
// load starts above the floor, a block above the clock when the last
// raise was recent, so ids may run ahead of the clock by a block for
// every load within a block's microseconds; the file is written
// atomically, so a crash never damages it.
//
// Invariants, under its queue's mu, once loaded: last < MaxLeaseID is the
// last id given (or where the ids start); reserved is the floor on disk;
// every id given since the load is in (the start, reserved].
type leaseIDs struct {
	loaded   bool
	last     uint64
	reserved uint64
}

// next returns a new lease id for the partition in dir, reading the floor
// on first use and raising it durably when the id is above it. An error
// gives no id: nothing may be leased with one the floor does not cover.
func (ids *leaseIDs) next(n *Node, dir string) (uint64, error) {
	if !ids.loaded {
		floor, err := n.readLeaseFloor(dir)
		if err != nil {
			return 0, err
		}
		ids.last = max(floor, uint64(max(time.Now().UnixMicro(), 0)))
		ids.reserved, ids.loaded = floor, true
	}
	id := ids.last + 1
	if id > wire.MaxLeaseID {
		return 0, fmt.Errorf("lease ids of %s: past %d", dir, uint64(wire.MaxLeaseID))
	}
	if id > ids.reserved {
		floor := min(id+leaseIDBlock, wire.MaxLeaseID)
		if err := n.writeLeaseFloor(dir, floor); err != nil {
			return 0, fmt.Errorf("lease ids of %s: %w", dir, err)
		}
		ids.reserved = floor
	}
	ids.last = id
	return id, nil
}

// readLeaseFloor reads dir's consumer.lease: 0 when it is absent or
// empty; a damaged one is logged and read as 0 (the clock then starts the
// ids), an I/O error returned.
func (n *Node) readLeaseFloor(dir string) (uint64, error) {
	path := filepath.Join(dir, wire.ConsumerLeaseFileName)
	b, err := vfs.ReadFile(n.cfg.FS, path, wire.LeaseFloorFileSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil && !errors.Is(err, vfs.ErrFileTooLarge):
		return 0, fmt.Errorf("lease ids: %w", err)
	}
	floor, _, derr := wire.DecodeLeaseFloor(b)
	if err != nil || derr != nil {
		n.logger.Warn("consumer.lease rejected: lease ids start from the clock", zap.String("path", path), zap.Error(errors.Join(err, derr)))
		return 0, nil
	}
	return floor, nil
}

// writeLeaseFloor writes floor into dir's consumer.lease atomically (a
// temporary file, fdatasync, rename, directory sync): a crash leaves the
// old floor or the new one whole, never a torn sector that would start
// the ids at the clock, below ids given before (they run up to a block
// ahead of it: every load starts above the floor).
func (n *Node) writeLeaseFloor(dir string, floor uint64) error {
	content, err := wire.EncodeLeaseFloor(floor)
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(n.cfg.FS, filepath.Join(dir, wire.ConsumerLeaseFileName), content[:])
}
