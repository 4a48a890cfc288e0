package partition

import (
	"fmt"
	"time"

	"github.com/narad-io/storage/vfs"
	"go.uber.org/zap"
)

// Preallocation: a busy partition prepares the space past its frames for
// the frames to come (a step of zeros after a small frame, blocks reserved
// for four after a larger one), never past the segment cap or under the
// floor of free space, and gives it all back when idle, at a roll, at a
// close and at a failed commit's truncate. The rules and their reasons
// are docs/design.md's "Commit speed"; here prepareAhead prepares,
// trimPrealloc and trimIfIdle give back, truncateKeepingTime keeps a
// segment's age through a trim.

// preallocBusyWithin: a frame written this soon after the previous one
// makes the partition busy; prepared space is given back once the
// partition has been idle this long.
const preallocBusyWithin = time.Second

// preallocStep is the zeros written ahead at a time in segments of cap
// segmentMaxBytes.
func preallocStep(segmentMaxBytes int64) int64 {
	return min(1<<20, max(segmentMaxBytes/64, 4<<10))
}

// zeros is what a step writes; never written to.
var zeros = make([]byte, 1<<20)

// prepareAhead prepares the space past a frame of n bytes just written
// (writePos is past it) when the partition is busy: wasBusy says the
// frame before it came less than preallocBusyWithin earlier.
func (s *state) prepareAhead(n int64, wasBusy bool) {
	if !wasBusy || s.preallocOff || s.log.opts.noPrealloc {
		return
	}
	step := preallocStep(s.log.opts.SegmentMaxBytes)
	limit := s.log.opts.SegmentMaxBytes
	if n > step/4 {
		if s.writePos+n <= s.reservedEnd {
			return
		}
		from, to := max(s.reservedEnd, s.writePos), min(s.writePos+4*n, limit)
		if to <= from || !s.aheadFits(to-max(from, s.allocEnd)) {
			return
		}
		s.reservedEnd = to // a failed reservation may keep blocks: trimmed all the same
		if err := s.file.Allocate(from, to-from); err != nil {
			s.preallocOff = true
			s.log.logger.Debug("block reservation failed; none more in this segment", zap.String("segment", s.active.path), zap.Error(err))
		}
		return
	}
	if s.writePos+n <= s.allocEnd {
		return
	}
	from, to := max(s.allocEnd, s.writePos), min(s.writePos+step, limit)
	if to <= from || !s.aheadFits(to-max(from, s.reservedEnd)) {
		return
	}
	s.allocEnd = to // some zeros may land even when the write fails: trimmed all the same
	if _, err := s.file.WriteAt(zeros[:to-from], from); err != nil {
		s.preallocOff = true
		s.log.logger.Debug("preallocation failed; none more in this segment", zap.String("segment", s.active.path), zap.Error(err))
	}
}

// aheadFits asks the space guard, if any, for grow bytes prepared past the
// frames (those not already reserved or written). A step it refuses is
// skipped, not failed: the next busy frame asks again.
func (s *state) aheadFits(grow int64) bool {
	return grow <= 0 || s.take(Allocation{Bytes: grow}) == nil
}

// prepared reports whether space past the frames was prepared.
func (s *state) prepared() bool {
	return s.allocEnd > s.writePos || s.reservedEnd > s.writePos
}

// trimPrealloc gives back the space prepared past the frames: cuts the
// zeros, durably, and the blocks reserved past the end, keeping the file's
// modification time. A failed truncate leaves it for the next trim (the
// error says so); a failed fsync poisons the log, like any fsync of the
// segment.
func (s *state) trimPrealloc() error {
	if !s.prepared() {
		s.allocEnd, s.reservedEnd = 0, 0
		return nil
	}
	hadZeros := s.allocEnd > s.writePos
	if err := truncateKeepingTime(s.file, s.writePos); err != nil {
		return fmt.Errorf("trim %s to byte %d: %w", s.active.path, s.writePos, err)
	}
	s.allocEnd, s.reservedEnd = 0, 0
	if !hadZeros {
		return nil // the size stays: only blocks given back, nothing to make durable
	}
	if err := s.file.Sync(); err != nil {
		s.poisonWith(fmt.Errorf("fdatasync the trim of %s: %w", s.active.path, err))
		return s.poison
	}
	s.syncedPos = s.writePos
	s.unsyncedSince = time.Time{}
	return nil
}

// trimIfIdle gives back the prepared space of a partition idle for
// preallocBusyWithin; the flusher's timer calls it.
func (s *state) trimIfIdle(now time.Time) {
	if !s.prepared() || now.Sub(s.lastFrameAt) < preallocBusyWithin {
		return
	}
	if err := s.trimPrealloc(); err != nil && s.poison == nil {
		s.log.logger.Warn("giving back the space prepared past the frames failed; retried at roll or close",
			zap.String("segment", s.active.path), zap.Error(err))
		s.idleTrimFailed, s.preallocOff = true, true // no timer asks again in this segment
	}
}

// truncateKeepingTime truncates f to size and puts its modification time
// back: the space trimmed was never part of the log, and the segment's age
// is its last frame's write.
func truncateKeepingTime(f vfs.File, size int64) error {
	fi, statErr := f.Stat()
	if err := f.Truncate(size); err != nil {
		return err
	}
	if statErr == nil {
		_ = f.SetModTime(fi.ModTime) // best effort: an age off by the trim's delay
	}
	return nil
}
