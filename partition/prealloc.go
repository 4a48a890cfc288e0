package partition

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Preallocation (docs/design.md, "Commit speed"). An fdatasync after a
// write that grows the file must also journal its new size and blocks;
// after a write over blocks already written, it has only the data to
// flush (on ext4 here, about 1.6x faster for a small commit), and a large
// write into blocks reserved ahead skips their allocation (5x faster for
// 16 MiB). So a partition that commits often prepares the space ahead of
// its frames, a step at a time:
//   - only a busy partition does: one whose previous frame was written
//     less than preallocBusyWithin ago; an idle one holds no extra space;
//   - ahead of a small frame (up to a quarter of a step; a step is 1/64
//     of the segment cap, 4 KiB to 1 MiB) it writes zeros, and its
//     commits overwrite them; the zeros are not synced on their own: the
//     next commit's fdatasync carries them once;
//   - ahead of a larger frame it reserves blocks (File.Allocate, which
//     changes neither size nor content) for four such frames: zeros would
//     double the bytes it writes;
//   - never past the segment cap;
//   - a roll trims both before it seals the segment (a sealed segment ends
//     at its last frame and holds no blocks past it), and so does a close,
//     so the next open finds the file exact; a failed commit's truncate
//     drops them too;
//   - after a crash, the zeros past the last frame are unwritten space to
//     recovery (WalkSegment's UnwrittenAt), never damage: it trims them
//     (and, on that path, the blocks reserved past the end);
//   - a step that fails (ENOSPC) costs the step, never the commit: the
//     frame is written as before, and no step is tried again in this
//     segment; nor after a failed commit's truncate, so zeros never take
//     the space a retried frame needs.

// preallocBusyWithin: a frame written this soon after the previous one
// makes the partition busy.
const preallocBusyWithin = time.Second

// preallocStep is the zeros written ahead at a time in segments of cap
// segmentMaxBytes.
func preallocStep(segmentMaxBytes int64) int64 {
	return min(1<<20, max(segmentMaxBytes/64, 4<<10))
}

// zeros is what a step writes; never written to.
var zeros = make([]byte, 1<<20)

// preallocate writes zeros ahead of a frame of n bytes about to be written
// at writePos, when the partition is busy and the space written ahead
// does not hold the frame.
func (s *state) preallocate(n int64, now time.Time) {
	busy := !s.lastFrameAt.IsZero() && now.Sub(s.lastFrameAt) < preallocBusyWithin
	s.lastFrameAt = now
	end := s.writePos + n
	step := preallocStep(s.log.opts.SegmentMaxBytes)
	if !busy || s.preallocOff || end <= max(s.allocEnd, s.reservedEnd) || s.log.opts.noPrealloc {
		return
	}
	if n > step/4 {
		s.reserve(end, n)
		return
	}
	to := min(end+step, s.log.opts.SegmentMaxBytes)
	if to <= end {
		return // the frame fills the segment: it rolls next
	}
	// Past the frame only: zeros under it would double its write. (Its
	// blocks are allocated as it lands; the next frames' are not.)
	from := max(s.allocEnd, end)
	if _, err := s.file.WriteAt(zeros[:to-from], from); err != nil {
		// Some zeros may have landed: trimmed with the rest.
		s.allocEnd = max(s.allocEnd, to)
		s.preallocOff = true
		s.log.logger.Debug("preallocation failed; none more in this segment", zap.String("segment", s.active.path), zap.Error(err))
		return
	}
	s.allocEnd = to
}

// reserve reserves the blocks of four frames of n bytes from writePos on
// (the frame about to be written ends at end), within the segment cap.
func (s *state) reserve(end, n int64) {
	to := min(s.writePos+4*n, s.log.opts.SegmentMaxBytes)
	if to < end {
		to = end // a frame past the cap: it rolls next, reserve only it
	}
	from := max(s.reservedEnd, s.writePos)
	if err := s.file.Allocate(from, to-from); err != nil {
		s.preallocOff = true
		s.log.logger.Debug("block reservation failed; none more in this segment", zap.String("segment", s.active.path), zap.Error(err))
		return
	}
	s.reservedEnd = to
}

// trimPrealloc cuts the zeros written ahead of the frames, durably, and
// gives back the blocks reserved past them. A failed fsync poisons the
// log, like any fsync of the segment.
func (s *state) trimPrealloc() error {
	reserved := s.reservedEnd > s.writePos
	s.reservedEnd = 0
	if s.allocEnd <= s.writePos {
		s.allocEnd = 0
		if reserved {
			// The size stays: nothing to make durable, only blocks to
			// give back, and a failure costs only those.
			if err := s.file.Truncate(s.writePos); err != nil {
				s.log.logger.Warn("giving back reserved blocks failed", zap.String("segment", s.active.path), zap.Error(err))
			}
		}
		return nil
	}
	if err := s.file.Truncate(s.writePos); err != nil {
		return fmt.Errorf("trim %s to byte %d: %w", s.active.path, s.writePos, err)
	}
	s.allocEnd = 0
	if err := s.file.Sync(); err != nil {
		s.poisonWith(fmt.Errorf("fdatasync the trim of %s: %w", s.active.path, err))
		return s.poison
	}
	s.syncedPos = s.writePos
	s.unsyncedSince = time.Time{}
	return nil
}
