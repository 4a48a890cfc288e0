package partition

import (
	"fmt"
	"sort"

	"go.uber.org/zap"
)

// ScrubFound records damage a scrub found in one of the log's sealed
// segments (docs/design.md, "Scrubber"): d as WalkSegment reported it for
// the segment whose first offset is segmentBase, its offsets running to
// end (d.ResumeBase, or the next segment's base for damage nothing valid
// follows) and its bytes from d.Pos to byteEnd (d.ResumeAt, or the end of
// the segment as walked). It is what a read that meets the damage does: the frames and
// positions the log's cache holds for those offsets and any proof of
// them are forgotten, so the next read goes to the disk and answers
// UnreadableError rather than serving what the cache remembers; the damage
// is counted in errors_total{kind="read_corrupt"} and logged once for its
// place. It takes only the cache's lock, for as long as a read's miss
// does, and never waits for the log's actor; on a closed log it does
// nothing but count and log (nothing is cached).
func (l *Log) ScrubFound(segmentBase int64, d SegmentDamage, end, byteEnd int64) {
	lo := d.Expect
	if lo < 0 {
		lo = segmentBase
	}
	l.cache.forget(func(base, frameEnd int64) bool { return base < end && frameEnd > lo })
	l.metrics.countError(kindReadCorrupt)
	if l.damage.first(damagePlace{segmentBase, d.Pos}) {
		l.logger.Warn("scrub found a damaged frame; its records are skipped, never served",
			zap.String("segment", fmt.Sprintf("%020d.log", segmentBase)), zap.Int64("byte", d.Pos), zap.Int64("byte_end", byteEnd),
			zap.Int64("offset", lo), zap.Int64("next_offset", end), zap.Error(d.Reason))
	}
}

// SegmentHot reports whether the sealed segment whose first offset is
// segmentBase is among the two the log read most recently (the hot set,
// docs/design.md, "Sealed segments do not pin a file descriptor"): its
// pages serve readers, so a scrub leaves them cached rather than dropping
// them after its read.
func (l *Log) SegmentHot(segmentBase int64) bool {
	l.hot.mu.Lock()
	defer l.hot.mu.Unlock()
	for _, s := range l.hot.segs {
		if s.base == segmentBase {
			return true
		}
	}
	return false
}

// SegmentSealed reports whether the segment whose first offset is
// segmentBase is one of the log's sealed segments as its readers see them
// (not the active one, nor one retention has detached). A scrub checks it
// before it reports what it found in a segment of an open log: a roll
// whose directory sync fails creates the next segment's file and removes
// it, and a listing made in between takes the active segment for sealed.
func (l *Log) SegmentSealed(segmentBase int64) bool {
	v := l.view.Load()
	i := sort.Search(len(v.sealed), func(i int) bool { return v.sealed[i].base >= segmentBase })
	return i < len(v.sealed) && v.sealed[i].base == segmentBase
}
