package simulation

import "time"

// A retention change is applied at once to the logs open when it is made
// (docs/design.md, "Retention"; docs/http-api.md, PATCH): it reaches them
// in place, never by closing them, and, when it moves their bounds, asks
// the reaper for a pass at once, so the new bounds are applied whether or
// not anything is written to them again, not at the next interval.
// Closed logs get them from the cold walk, within its interval
// (retentionApplied checks that, and every log, after its delay).

// preallocIdle is how long a partition goes unwritten before the space
// its log prepared past the frames is given back: partition's
// preallocBusyWithin (1 s), and the flusher's pass that trims it.
const preallocIdle = 1100 * time.Millisecond

// openParts lists the partitions of t whose log is open now.
func (r *runner) openParts(t *topicModel) []int {
	var open []int
	for pi := range t.parts {
		if _, ok := r.n.LogIfOpen(t.name, pi); ok {
			open = append(open, pi)
		}
	}
	return open
}

// retentionAtOnce checks, right after a change of t's bounds returned and
// the bubble came to rest (the pass it asked for ran, no time passed),
// every partition in open (its log open at the change): no segment is
// kept whose last record is older than the age bound (a sealed one, or
// the active one, which the pass rotates first unless a failed fdatasync
// poisoned the log), and no sealed segment while the partition holds more
// than the byte bound. moved says the change moved the bounds; one that
// did not asks for no pass. What a partition holds is its segments'
// frames: the active segment's file also holds the zeros a busy partition
// prepares past its frames until it has been idle preallocIdle, so its
// size counts only once the last commit is older than that (and never
// while a failed fdatasync poisoned the log: it trims nothing).
func (r *runner) retentionAtOnce(t *topicModel, open []int, moved bool) {
	if !moved || (t.retMs == 0 && t.retBytes == 0) {
		return
	}
	r.settle()
	poisoned := r.poisonedLogs()
	now := time.Now()
	for _, pi := range open {
		p := t.parts[pi]
		bases, sizes := r.segments(t, pi)
		var total int64
		idle := len(p.commitAt) == 0 || !p.commitAt[len(p.commitAt)-1].After(now.Add(-preallocIdle))
		for i, base := range bases {
			if i < len(bases)-1 || (idle && !poisoned[p]) {
				total += sizes[i]
			}
			end := p.committed
			if i+1 < len(bases) {
				end = bases[i+1]
			}
			rotated := !poisoned[p] || i < len(bases)-1
			// A millisecond of slack: the pass ran a nanosecond before now.
			if t.retMs > 0 && rotated && end > base && end-1 < int64(len(p.commitAt)) &&
				p.lastWrite(base, end).Before(now.Add(-time.Duration(t.retMs)*time.Millisecond-time.Millisecond)) {
				r.failf("retention %s/%d: segment [%d, %d) last written %v ago kept past its %d ms bound right after the change, its log open at it",
					t.name, pi, base, end, now.Sub(p.lastWrite(base, end)), t.retMs)
			}
		}
		if t.retBytes > 0 && total > t.retBytes && len(bases) > 1 {
			r.failf("retention %s/%d: %d B in %d segments kept past the %d B bound right after the change, its log open at it",
				t.name, pi, total, len(bases), t.retBytes)
		}
	}
}
