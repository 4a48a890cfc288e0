package partition

import (
	"errors"
	"fmt"
)

// Commit times never decrease along a partition (docs/design.md,
// "Segments, frames and records"): appendEnvelopes raises each to the
// newest before it, the floor. Across a reopen the floor is the newest
// readable record's time: recovery reads it from the active segment's last
// frame. When that is not enough (the active segment holds no frame, a
// close or a crash right after a roll; or its last frame does not decode),
// the first append reads the records at the end of the log, from a frame
// position it can trust (an entry of the newest segment's time index that
// checks out, or the entry the actor itself collected) to the high
// watermark: at most one time index spacing of frames. A time index gives
// positions only; its times are never taken for records' times. A read
// that fails refuses the append (a retryable commit failure), so no
// record is ever stamped under a floor nobody read.

// loadFloor sets the commit-time floor from the newest readable records.
// The actor calls it before the first append of a log whose floor
// recovery could not read, and again until it succeeds.
func (s *state) loadFloor() error {
	v := s.log.view.Load()
	if s.hwm <= v.start {
		s.floorKnown = true // no record left to be later than
		return nil
	}
	seg, from := s.active, s.active.base
	if s.hwm == s.active.base {
		seg = s.sealed[len(s.sealed)-1]
		f, err := seg.file.acquire()
		if err != nil {
			return fmt.Errorf("commit-time floor: %w", err)
		}
		defer seg.file.release()
		entries, built, err := s.log.loadTimeIndex(seg, f)
		if err != nil {
			return fmt.Errorf("commit-time floor: %w", err)
		}
		if built {
			s.writeTimeIndex(seg, entries)
		}
		for i := len(entries) - 1; i >= 0; i-- {
			if s.log.seedIfFrame(seg, f, entries[i]) {
				from = entries[i].Offset
				break
			}
		}
		from = max(from, seg.base)
	} else if n := len(s.active.times); n > 0 {
		from = s.active.times[n-1].Offset
	}
	from = max(from, v.start)
	for o := from; o < s.hwm; {
		f, err := s.log.frameAt(v, o)
		var unreadable *UnreadableError
		switch {
		case errors.As(err, &unreadable) && unreadable.Next > o:
			o = unreadable.Next
			continue
		case err != nil:
			return fmt.Errorf("commit-time floor: %w", err)
		}
		s.commitFloor = max(s.commitFloor, f.records[len(f.records)-1].CommittedAtUnixMs)
		o = f.end
	}
	s.floorKnown = true
	return nil
}

// ensureFloor loads the floor when it is not known yet; an error is the
// append's or produce's to answer.
func (s *state) ensureFloor() error {
	if s.floorKnown {
		return nil
	}
	if err := s.loadFloor(); err != nil {
		return commitError("read the commit-time floor", err)
	}
	return nil
}
