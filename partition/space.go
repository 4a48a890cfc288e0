package partition

import (
	"time"

	"github.com/narad-io/storage/wire"
)

// The space a write takes from the file system, for a node's floor of
// free space (docs/design.md, "A floor of free space"). A log given a
// SpaceGuard (Options.Space) asks it before it takes a batch in (Produce,
// Append), with what the batch adds to what the next commit writes:
//   - the frame: its header (once a frame) and each record's length and
//     envelope (with a codec, the records' uncompressed size: a frame zstd
//     cannot shrink comes out a few bytes larger), less the part
//     that lands in space already prepared past the frames (zeros written
//     ahead, blocks reserved), which the file system has counted already;
//   - a roll the write makes (the segment is full or past its roll age,
//     before the frame; or the frame fills it, after): the sealed segment's
//     time index file and the new segment file (two files), less the
//     prepared space the roll gives back.
//
// What the guard took, the log holds (state.spaceHeld) until the writes
// are done: once nothing taken is still buffered or unwritten (its frames
// are in the file, where a fresh reading of the free space sees them, or
// were dropped: a failed commit's discard, a close), it releases it
// (settleSpace), and until then the guard keeps it off every fresh
// reading, so a write still on its way at a reading is counted too.
//
// A batch the guard refuses is answered with its error, and nothing of it
// is buffered or written. The space a busy log prepares past a frame
// (prealloc.go) is asked for separately, when it is prepared: optional,
// it is skipped rather than taken under the floor, and never refuses a
// batch. Bytes are counted, not the file system's blocks: a file can take
// up to a block more than its count.

// Allocation is what a write adds to the file system; a write that gives
// back more than it takes (a roll trimming the zeros past the frames)
// adds less than nothing.
type Allocation struct {
	Bytes int64 // bytes of file contents, or of blocks reserved
	Files int64 // files created
}

// SpaceGuard keeps a floor of free space under a node's logs. Its methods
// are called from logs' actors, at once, and must not wait long: a statfs
// at most.
type SpaceGuard interface {
	// Admit answers nil when the free space less a stays at or above the
	// floor, and counts a as taken (or, under 0, given back); otherwise
	// the error that refuses the write, wrapping ErrNoSpace.
	Admit(a Allocation) error
	// Release gives back what earlier Admits took, once its writes are
	// done (in the file system, which the free space read from then on
	// counts) or given up: until then, the guard keeps it off every fresh
	// reading of the free space. A log releases exactly what it was
	// admitted, at the latest when it closes.
	Release(a Allocation)
}

// minus is what a adds over taken.
func (a Allocation) minus(taken Allocation) Allocation {
	return Allocation{Bytes: a.Bytes - taken.Bytes, Files: a.Files - taken.Files}
}

// take asks the guard, if any, for a, and holds what it takes until
// settleSpace releases it.
func (s *state) take(a Allocation) error {
	g := s.log.opts.Space
	if g == nil {
		return nil
	}
	if err := g.Admit(a); err != nil {
		return err
	}
	s.spaceHeld.Bytes += a.Bytes
	s.spaceHeld.Files += a.Files
	return nil
}

// settleSpace releases what the log holds of its guard once nothing it
// took is still on its way to the file: nothing buffered, no unwritten
// frame, or the log closed. The actor calls it after every message and
// timer pass. (A roll an append's frames owe past the cap, done by their
// commit, is released with the frames: a time index and two inodes a
// fresh reading may miss for a moment.)
func (s *state) settleSpace() {
	if s.spaceHeld == (Allocation{}) || !s.closed && (len(s.buffer) > 0 || s.unwritten != nil) {
		return
	}
	s.log.opts.Space.Release(s.spaceHeld)
	s.spaceHeld = Allocation{}
}

// bufferFrameBytes is the size of a frame of the buffered records, 0 with none.
func (s *state) bufferFrameBytes() int64 {
	if len(s.buffer) == 0 {
		return 0
	}
	return int64(wire.FrameHeaderSize + len(s.buffer)*wire.RecordLenSize + s.bufferBytes)
}

// batchFrameBytes is what envs add to a frame of frame bytes (0: none yet,
// so the header too).
func batchFrameBytes(frame int64, envs [][]byte) int64 {
	n := int64(len(envs)*wire.RecordLenSize + envBytes(envs))
	if frame == 0 {
		n += wire.FrameHeaderSize
	}
	return n
}

// frameAllocation is what the next commit's frame of frame bytes (the
// buffered records and the batches joining them) adds to the file system,
// written after the unwritten frame of a failed write, if any.
func (s *state) frameAllocation(frame int64, now time.Time) Allocation {
	if frame == 0 {
		return Allocation{}
	}
	pos := s.writePos
	if s.unwritten != nil {
		pos += int64(len(s.unwritten.bytes))
	}
	held := max(pos, s.allocEnd, s.reservedEnd) // the file's blocks end here
	entries := len(s.active.times) + 1          // the sealed segment's time index, an entry for this frame at most
	var a Allocation
	if s.unwritten == nil && s.rollDue(now) {
		// The frame opens the next segment, once the roll gave the
		// prepared space back.
		a = rollAllocation(entries)
		a.Bytes -= held - pos // may leave the write's count under 0: it frees more than it takes
		pos, held, entries = 0, 0, 1
	}
	a.Bytes += max(0, pos+frame-held)
	if pos+frame >= s.log.opts.SegmentMaxBytes {
		// The frame fills the segment: the commit rolls it after. Nothing
		// is prepared past the cap, so the roll gives nothing back.
		roll := rollAllocation(entries)
		a.Bytes += roll.Bytes
		a.Files += roll.Files
	}
	return a
}

// rollAllocation is what a roll creates: the sealed segment's time index
// file, of entries entries at most, and the next segment's file, empty.
func rollAllocation(entries int) Allocation {
	return Allocation{Bytes: int64(wire.TimeIndexFileSize(entries)), Files: 2}
}

// admit asks the guard, if any, for what envs add to a frame of frame
// bytes; it returns the frame's new size, or the guard's refusal.
func (s *state) admit(frame int64, envs [][]byte, now time.Time) (int64, error) {
	next := frame + batchFrameBytes(frame, envs)
	if s.log.opts.Space != nil {
		if err := s.take(s.frameAllocation(next, now).minus(s.frameAllocation(frame, now))); err != nil {
			return frame, err
		}
	}
	return next, nil
}
