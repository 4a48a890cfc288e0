package simulation

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
)

// checkAll checks every partition's bounds against the model (after every
// operation); full reads every record and the consumer progress too
// (after a restart or a crash, and at the end of the run).
func (r *runner) checkAll(full bool) {
	for _, t := range r.topics {
		r.on(t)
		infos := r.describe(t)
		for pi, p := range t.parts {
			info := infos[pi]
			if info.Known && info.HighWatermark != p.committed {
				r.failf("%s/%d: high watermark %d, want %d (every produce answered)", t.name, pi, info.HighWatermark, p.committed)
			}
			if info.StartOffset < p.start {
				r.failf("%s/%d: log start moved back from %d to %d without a crash", t.name, pi, p.start, info.StartOffset)
			}
			if p.unbounded && info.StartOffset != p.start {
				r.failf("%s/%d: log start moved from %d to %d with no retention bound set", t.name, pi, p.start, info.StartOffset)
			}
			if info.StartOffset > p.committed {
				r.failf("%s/%d: log start %d past the high watermark %d", t.name, pi, info.StartOffset, p.committed)
			}
			p.start, p.settled = info.StartOffset, max(p.settled, info.StartOffset)
			p.unbounded = t.retMs == 0 && t.retBytes == 0
			if full {
				r.readAll(t, pi)
				r.checkConsumer(t, pi)
			}
		}
		if full {
			r.checkCursors(t)
		}
	}
}

// readAll reads a partition from its start to its high watermark.
func (r *runner) readAll(t *topicModel, pi int) {
	p := t.parts[pi]
	for o := p.start; o < p.committed; {
		var res partition.ReadResult
		err := retryBusy(func() (err error) { res, err = r.n.Read(r.ctx, t.name, pi, o, 1000, 1<<20); return err })
		if errors.Is(err, partition.ErrOffsetDeleted) && !p.unbounded {
			// A sweep ran since the start was read (the reaper, woken at
			// once by a retention change, runs beside the check): read on
			// from where it left the log. What it may delete is checked
			// by retentionApplied and the start's own checks.
			if start := r.describe(t)[pi].StartOffset; start > o && start <= p.committed {
				p.start, o = start, start
				continue
			}
		}
		r.must(fmt.Sprintf("read %s/%d from %d", t.name, pi, o), err)
		r.checkServed(t, pi, o, res)
		o += int64(len(res.Records))
	}
}

// consumerState reads a partition's consumer progress.
func (r *runner) consumerState(t *topicModel, pi int) (runtime.ConsumerState, func(int64) bool) {
	var st runtime.ConsumerState
	err := retryBusy(func() (err error) { st, err = r.n.ConsumerState(r.ctx, t.name, pi); return err })
	r.must(fmt.Sprintf("consumer state %s/%d", t.name, pi), err)
	if st.HighWatermark != t.parts[pi].committed {
		r.failf("consumer state %s/%d: high watermark %d, want %d", t.name, pi, st.HighWatermark, t.parts[pi].committed)
	}
	ahead := map[int64]bool{}
	for _, o := range st.AckedAhead {
		ahead[o] = true
	}
	return st, func(o int64) bool { return o < st.Frontier || ahead[o] }
}

// checkConsumer checks a partition's consumer progress with no crash
// since the model last matched it: every ack kept, nothing acked that was
// not, the frontier honest, the leases counted.
func (r *runner) checkConsumer(t *topicModel, pi int) {
	p := t.parts[pi]
	st, nodeAcked := r.consumerState(t, pi)
	for o := p.start; o < p.committed; o++ {
		if got, want := nodeAcked(o), p.isAcked(o); got != want {
			r.failf("consumer state %s/%d: offset %d acked %v, want %v (frontier %d, %d acked ahead)",
				t.name, pi, o, got, want, st.Frontier, len(st.AckedAhead))
		}
	}
	r.checkFrontier(t, pi, st.Frontier, "consumer state")
	want, maybe := 0, 0
	now := time.Now()
	for o := range p.leases {
		if _, ok := p.leasedNow(o, now); ok {
			if o < p.start {
				maybe++
			} else {
				want++
			}
		}
	}
	if st.Leased < want || st.Leased > want+maybe {
		r.failf("consumer state %s/%d: %d leased, want %d (+%d of deleted records)", t.name, pi, st.Leased, want, maybe)
	}
}

// checkConsumers is the operation that checks every partition's progress.
func (r *runner) checkConsumers() {
	r.logf("check consumer state")
	for _, t := range r.topics {
		r.on(t)
		for pi := range t.parts {
			r.checkConsumer(t, pi)
		}
	}
}

// afterCrash checks consumer progress after a crash at at and takes the
// model back to what the node holds. The contract (docs/durability.md):
// no offset is held acked whose ack did not return, but a record retention
// deleted, which the queue settles unread (docs/design.md, "Queue
// consume"), even when the crash brought its segment back; an ack may be
// lost only if it returned within ackWindow before the crash, or if it was
// above the frontier while the acked-ahead set held more than keptAhead
// offsets (a consumer.ahead slot keeps only its lowest).
func (r *runner) afterCrash(at time.Time, ahead map[*partModel]int) {
	r.afterCrashOf(func(*partModel) time.Time { return at }, ahead)
}

// afterCrashOf is afterCrash with each partition's acks held to their age
// at a time of its own (atOf): a partition whose write-outs failed before
// the crash at the fault's arm, the others at the crash.
func (r *runner) afterCrashOf(atOf func(*partModel) time.Time, ahead map[*partModel]int) {
	for _, t := range r.topics {
		r.on(t)
		infos := r.describe(t)
		for pi, p := range t.parts {
			at := atOf(p)
			p.settled = max(p.settled, p.start)
			p.start = infos[pi].StartOffset // a crash may bring back segments a sweep had detached
			st, nodeAcked := r.consumerState(t, pi)
			for o := p.start; o < p.committed; o++ {
				got, when := nodeAcked(o), p.acked[o]
				switch {
				case got && !p.isAcked(o) && o < p.settled:
					p.acked[o] = at // settled: retention deleted it before the crash brought it back
				case got && !p.isAcked(o):
					r.failf("after the crash %s/%d: offset %d held acked, its ack never returned (frontier %d)", t.name, pi, o, st.Frontier)
				case !got && p.isAcked(o) && when.Before(at.Add(-ackWindow)) && ahead[p] <= keptAhead && !p.mayLoseOverSlot(o, at):
					r.failf("after the crash %s/%d: the ack of offset %d, returned %v before the crash, was lost (frontier %d, %d acked ahead)",
						t.name, pi, o, at.Sub(when), st.Frontier, len(st.AckedAhead))
				case !got && p.isAcked(o):
					delete(p.acked, o) // the contract let the crash take it back
				}
			}
			for o := range p.acked {
				if o < p.start && !nodeAcked(o) {
					delete(p.acked, o) // deleted by retention: no promise
				}
			}
			r.checkFrontier(t, pi, st.Frontier, "after the crash")
		}
	}
}

// retentionApplied advances the clock by retentionWithin and checks that
// every partition of every topic with a bound kept no segment retention
// should have deleted: none whose last record is older than the age bound
// by more than the delay, and no sealed segment while the partition holds
// more bytes than the byte bound. Nothing is written meanwhile.
func (r *runner) retentionApplied() {
	d := r.odd(retentionWithin)
	poisoned := r.poisonedLogs() // their active segments wait for a reopen (check_fault.go)
	r.logf("sleep %v, then check retention applied", d)
	r.sleep(d)
	r.forgetExpired()
	now := time.Now()
	for _, t := range r.topics {
		r.on(t)
		if t.retMs == 0 && t.retBytes == 0 {
			continue
		}
		infos := r.describe(t)
		for pi, p := range t.parts {
			bases, sizes := r.segments(t, pi)
			start := infos[pi].StartOffset
			var total int64
			for i, base := range bases {
				total += sizes[i]
				end := p.committed
				if i+1 < len(bases) {
					end = bases[i+1]
				}
				rotated := !poisoned[p] || i < len(bases)-1
				if t.retMs > 0 && rotated && end > base && end-1 >= start && end-1 < int64(len(p.commitAt)) &&
					!p.lastWrite(base, end).After(now.Add(-time.Duration(t.retMs)*time.Millisecond-retentionWithin)) {
					r.failf("retention %s/%d: segment [%d, %d) last written %v ago kept past its %d ms bound (changed %v ago)",
						t.name, pi, base, end, now.Sub(p.lastWrite(base, end)), t.retMs, now.Sub(t.retSince))
				}
			}
			if t.retBytes > 0 && total > t.retBytes && len(bases) > 1 {
				r.failf("retention %s/%d: %d B in %d segments kept past the %d B bound (changed %v ago)",
					t.name, pi, total, len(bases), t.retBytes, now.Sub(t.retSince))
			}
		}
	}
}

// segments lists a partition's segment files: their first offsets and sizes.
func (r *runner) segments(t *topicModel, pi int) (bases, sizes []int64) {
	pdir, _ := wire.PartitionDirName(pi)
	dir := path.Join(dataDir, wire.TopicsDirName, t.name, pdir)
	entries, err := r.d.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // never opened: made at its first open
	}
	r.must("list "+dir, err)
	for _, e := range entries {
		base, err := wire.ParseSegmentFileName(e.Name)
		if err != nil {
			continue // not a segment (an index, the hwm file, consumer files)
		}
		fi, err := r.d.Stat(path.Join(dir, e.Name))
		r.must("stat "+e.Name, err)
		bases, sizes = append(bases, base), append(sizes, fi.Size)
	}
	// ReadDir sorts by name, and the names are zero-padded: in order.
	return bases, sizes
}

// leasedString shows a consume's answer: partition, lease id, offsets.
func leasedString(recs []runtime.LeasedRecord) string {
	if len(recs) == 0 {
		return "nothing"
	}
	var b strings.Builder
	for i, rec := range recs {
		if i == 0 || rec.Partition != recs[i-1].Partition {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "p%d lease %d:", rec.Partition, rec.LeaseID)
		}
		fmt.Fprintf(&b, " %d", rec.Offset)
	}
	return b.String()
}

// offsetsString shows a list of offsets, runs folded (3..9).
func offsetsString(offsets []int64) string {
	s := slices.Clone(offsets)
	slices.Sort(s)
	s = slices.Compact(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d..%d", s[i], s[j]))
		} else {
			parts = append(parts, fmt.Sprint(s[i]))
		}
		i = j + 1
	}
	return "[" + strings.Join(parts, " ") + "]"
}
