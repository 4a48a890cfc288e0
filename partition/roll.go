package partition

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// fullyCommitted reports whether nothing sits above the high watermark: no
// written frame, no unwritten frame, no buffered record. Only such a
// segment is sealed, so the failed-commit discard always finds the tail in
// the active segment.
func (s *state) fullyCommitted() bool {
	return s.written == s.hwm && s.unwritten == nil && len(s.buffer) == 0
}

// rollDue reports whether the next frame write must go to a new segment:
// the active one is full, or its oldest record is older than the roll age
// (docs/design.md, "Retention", time-based roll), and it is fully
// committed.
func (s *state) rollDue(now time.Time) bool {
	if s.active.size == 0 || s.written != s.hwm {
		return false
	}
	if s.active.full {
		return true
	}
	age := rollAge(s.maxSegmentAge, s.retention)
	return age > 0 && !s.active.firstWrite.IsZero() && now.Sub(s.active.firstWrite) >= age
}

// errRollDeferred: the roll could not give back the space prepared past
// the frames, so the segment is not sealed yet; the next write goes on in
// it (past the cap, a little) until a roll can. Nothing failed.
var errRollDeferred = errors.New("roll deferred: the space prepared past the frames is not given back yet")

// roll seals the active segment and starts the next, named by the offset
// the sealed one ends at: fsync the active segment, create the new file,
// fsync the directory, then switch. The sealed range ends exactly at its
// successor's base, so nothing may be written to the old segment after the
// new file exists: if the switch cannot complete, the new file is removed,
// and a log that cannot remove it is poisoned.
func (s *state) roll() error {
	if err := s.trimPrealloc(); err != nil {
		if s.poison != nil {
			return err
		}
		// The space prepared past the frames is not the log's: a segment
		// that cannot give it back is not sealed yet, and the next write
		// goes on in it (past the cap, a little) until a roll can.
		return fmt.Errorf("%w: %w", errRollDeferred, err)
	}
	if err := s.sync(); err != nil {
		return err
	}
	dir := s.log.dir
	name, err := wire.SegmentFileName(s.written)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	files := s.log.opts.FS
	f, err := files.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return fmt.Errorf("roll: create %s: %w", path, err)
	}
	if err := files.SyncDir(dir); err != nil {
		f.Close()
		if rmErr := files.Remove(path); rmErr != nil {
			s.poisonWith(fmt.Errorf("roll: sync directory %s (%v), then remove %s: %w", dir, err, path, rmErr))
			return s.poison
		}
		return fmt.Errorf("roll: sync directory %s: %w", dir, err)
	}

	old := s.active
	old.sealedSize = old.size
	old.full = false
	sealed := make([]*segment, len(s.sealed), len(s.sealed)+1)
	copy(sealed, s.sealed)
	s.sealed = append(sealed, old)
	old.file.release() // the actor's reference; readers keep theirs
	s.log.hot.touch(old)

	s.active = &segment{base: s.written, path: path, file: newSegFile(files, path)}
	s.active.file.adopt(f)
	s.file = f
	s.writePos, s.syncedPos, s.hwmPos, s.allocEnd, s.reservedEnd = 0, 0, 0, 0, 0
	// lastFrameAt stays: a roll does not make a busy partition idle, and
	// the frame that opens the segment prepares the space past it.
	s.unsyncedSince, s.preallocOff, s.idleTrimFailed = time.Time{}, false, false
	s.writeTimeIndex(old, old.times) // before readers can see it sealed
	old.times = nil
	s.publish()
	s.log.metrics.segmentsRolled.Inc()
	s.log.logger.Debug("segment rolled", zap.String("sealed", old.path), zap.String("active", path))
	return nil
}
