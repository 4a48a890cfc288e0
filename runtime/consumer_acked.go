package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// The whole acked-ahead set across a clean close (docs/design.md,
// "Consumer progress"). A consumer.ahead slot holds only the lowest
// offsets of a large set; a clean close of the log (idle eviction, the
// open-log budget, a retention change, an install, the node's Close) that
// meets such a set writes all of it to consumer.acked, atomically, after
// the slot's write-out; recovery adds its offsets to what the slots give.
// An ack is never taken back, so every offset the file holds stays acked
// whatever the slots say: recovery adds only those above the recovered
// frontier and below the high watermark, and a file a crash left older
// than the slots still adds only true acks. A crash loses at most the
// acks since the last write-out, as before; a clean close loses none.

// writeAckedLocked, at a clean close after the write-out, makes
// consumer.acked hold c's whole set when its slot could not, and removes a
// file no longer needed. The caller holds c.mu.
func (cm *committer) writeAckedLocked(c *consumer) error {
	path := filepath.Join(c.dir, wire.ConsumerAckedFileName)
	ahead := c.sortedAhead()
	var slot [wire.AheadSlotSize]byte
	stored, err := wire.EncodeAheadSlot(&slot, wire.AheadRecord{Incarnation: c.incarnation, Frontier: c.frontier, Ahead: ahead})
	if err != nil {
		return err
	}
	if stored == len(ahead) {
		if !c.ackedOnDisk {
			return nil
		}
		if err := vfs.RemoveDurable(cm.n.cfg.FS, path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("consumer.acked: %w", err)
		}
		c.ackedOnDisk, c.ackedSeq = false, 0
		return nil
	}
	if c.ackedOnDisk && c.ackedSeq == c.seq {
		return nil // the file holds this record's set already
	}
	b, err := wire.EncodeAckedFile(wire.AckedRecord{Sequence: c.seq, Incarnation: c.incarnation, Frontier: c.frontier, Ahead: ahead})
	if err != nil {
		return err
	}
	c.ackedOnDisk = true // from the first call on, whatever it left
	if err := vfs.WriteFileAtomic(cm.n.cfg.FS, path, b); err != nil {
		c.ackedSeq = 0
		return err
	}
	c.ackedSeq = c.seq
	return nil
}

// mergeAcked adds the offsets of consumer.acked to c's recovered set:
// those above c's frontier and below hwm, within MaxAckedAhead (the
// lowest first). A file that cannot be read as this incarnation's is
// logged and counted, and left for the next clean close to replace. The
// caller holds c.mu.
func (n *Node) mergeAcked(c *consumer, hwm int64) error {
	path := filepath.Join(c.dir, wire.ConsumerAckedFileName)
	b, err := vfs.ReadFile(n.cfg.FS, path, wire.AckedMaxFileSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil && !errors.Is(err, vfs.ErrFileTooLarge):
		return fmt.Errorf("consumer progress %s: %w", path, err)
	}
	c.ackedOnDisk = true
	rec, derr := wire.DecodeAckedFile(b)
	switch {
	case err != nil || derr != nil:
		n.consumerMetrics.slotDecodeFailures.Inc()
		n.logger.Warn("consumer.acked rejected", zap.String("path", path), zap.Error(errors.Join(err, derr)))
		return nil
	case rec.Incarnation != c.incarnation:
		n.consumerMetrics.slotDecodeFailures.Inc()
		n.logger.Warn("consumer.acked of another incarnation rejected", zap.String("path", path))
		return nil
	}
	if rec.Sequence == c.seq {
		c.ackedSeq = rec.Sequence
	}
	for _, o := range rec.Ahead {
		if len(c.ahead) >= MaxAckedAhead || o >= hwm {
			break
		}
		if o >= c.frontier {
			c.ahead[o] = struct{}{}
		}
	}
	if _, ok := c.ahead[c.frontier]; ok {
		for ; ; c.frontier++ {
			if _, ok := c.ahead[c.frontier]; !ok {
				break
			}
			delete(c.ahead, c.frontier)
		}
		c.dirty = true
		n.committer.dirty(c)
	}
	return nil
}

// sortedAhead is c's acked-ahead set in order; the caller holds c.mu.
func (c *consumer) sortedAhead() []int64 {
	ahead := make([]int64, 0, len(c.ahead))
	for o := range c.ahead {
		ahead = append(ahead, o)
	}
	slices.Sort(ahead)
	return ahead
}
