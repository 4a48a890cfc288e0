package partition

import "sort"

// view is what readers see: an immutable snapshot the actor publishes
// after every change readers can observe (a high-watermark advance, a
// roll, a retention detach, close). Readers load it and read frames
// without a round trip to the actor.
type view struct {
	sealed []*segment // oldest first; shared, never changed in place
	active *segment
	hwm    int64 // high watermark
	hwmPos int64 // bytes of the active segment below the high watermark
	start  int64 // lowest offset held
	closed bool
}

// publish makes the actor's current state the readers' view.
func (s *state) publish() {
	start := s.active.base
	if len(s.sealed) > 0 {
		start = s.sealed[0].base
	}
	s.log.view.Store(&view{sealed: s.sealed, active: s.active, hwm: s.hwm, hwmPos: s.hwmPos, start: start, closed: s.closed})
}

// segmentFor returns the segment holding offset (start <= offset < hwm),
// the offset its readable range ends at, and the bytes readable in it.
func (v *view) segmentFor(offset int64) (seg *segment, endOffset, limit int64) {
	if offset >= v.active.base {
		return v.active, v.hwm, v.hwmPos
	}
	i := sort.Search(len(v.sealed), func(i int) bool { return v.sealed[i].base > offset }) - 1
	seg = v.sealed[i]
	endOffset = v.active.base
	if i+1 < len(v.sealed) {
		endOffset = v.sealed[i+1].base
	}
	return seg, endOffset, seg.sealedSize
}
