package partition

import (
	"fmt"
	"time"

	"github.com/narad-io/storage/vfs"
	"go.uber.org/zap"
)

// Preallocation (docs/design.md, "Commit speed"). An fdatasync after a
// write that grows the file must also journal its new size and blocks;
// after a write over blocks already written, it has only the data to
// flush (on ext4 here, about 1.6x faster for a small commit), and a large
// write into blocks reserved ahead skips their allocation (5x faster for
// 16 MiB). So a partition that commits often prepares the space past its
// frames, a step at a time, for the frames to come:
//   - only a busy partition does: one whose previous frame was written
//     less than preallocBusyWithin before the frame just written;
//   - after a small frame (up to a quarter of a step; a step is 1/64 of
//     the segment cap, 4 KiB to 1 MiB) it writes a step of zeros past the
//     frames, and the next frames overwrite them; the zeros are not synced
//     on their own: the next commit's fdatasync carries them once;
//   - after a larger frame it reserves blocks for four such frames
//     (File.Allocate, which changes neither size nor content): zeros
//     would double the bytes it writes;
//   - always after the frame is written, so the space prepared never takes
//     the space the frame itself needs on a full disk; never past the
//     segment cap; never under a floor of free space (Options.Space): a
//     step the guard refuses is skipped, and the next busy frame asks again;
//   - a partition idle for preallocBusyWithin gives it all back (the
//     flusher's timer), and so does a roll, before it seals the segment (a
//     sealed segment ends at its last frame and holds no block past it;
//     the partition stays busy, and the frame opening the next segment
//     prepares past it),
//     and a close, so the next open finds the file exact; a failed
//     commit's truncate drops it too. A trim puts the file's modification
//     time back as it found it: recovery takes a segment's age from it;
//   - after a crash, zeros past the last frame are unwritten space to
//     recovery (WalkSegment's UnwrittenAt), never damage: it trims them;
//   - a step that fails (ENOSPC) costs the step, never the commit: what it
//     got is trimmed with the rest, and no step is tried again in this
//     segment; nor after a failed commit's truncate.

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
