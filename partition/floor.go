package partition

import (
	"go.uber.org/zap"
)

// Commit times never decrease along a partition (docs/design.md,
// "Segments, frames and records"): appendEnvelopes raises each to the
// newest before it, the floor. Across a reopen the floor is the last
// record's time: recovery reads it from the active segment's last frame;
// when the active segment holds no frame (a close or a crash right after a
// roll), the first append reads the last record of the newest sealed
// segment, through its time index so the read starts near the end. A
// floor that cannot be read (the record is damaged) is the newest time
// the time index holds, the best lower bound left.

// loadFloor sets the commit-time floor from the newest sealed segment's
// last record. The actor calls it once, at the first append of a log
// whose active segment held no frame at open.
func (s *state) loadFloor() {
	s.floorKnown = true
	v := s.log.view.Load()
	if len(s.sealed) == 0 || s.hwm <= v.start || s.hwm != s.active.base {
		return
	}
	seg := s.sealed[len(s.sealed)-1]
	f, err := seg.file.acquire()
	if err != nil {
		s.log.logger.Warn("commit-time floor: segment unreadable", zap.String("segment", seg.path), zap.Error(err))
		return
	}
	defer seg.file.release()
	entries, built, err := s.log.loadTimeIndex(seg, f)
	if err != nil {
		s.log.logger.Warn("commit-time floor: time index", zap.String("segment", seg.path), zap.Error(err))
		return
	}
	if built {
		s.writeTimeIndex(seg, entries)
	}
	if n := len(entries); n > 0 {
		s.commitFloor = max(s.commitFloor, entries[n-1].TimeMs)
	}
	frame, err := s.log.frameAt(v, s.hwm-1)
	if err != nil {
		s.log.logger.Warn("commit-time floor: last record unreadable; using the time index's newest time",
			zap.String("segment", seg.path), zap.Error(err))
		return
	}
	s.commitFloor = max(s.commitFloor, frame.records[s.hwm-1-frame.base].CommittedAtUnixMs)
}
