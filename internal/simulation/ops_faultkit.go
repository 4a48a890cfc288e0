package simulation

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// Injected faults (docs/durability.md, "The simulator"). Each operation
// here arms one fault of vfs/sim (Disk.Inject) on the files of one
// partition or the metastore's, for one call or for every call of a few
// operations, and runs the operations that may meet it, each checked
// against the model: when the fault fired during an operation
// (Injection.Fired), its answer must be the error kind the docs name for
// it and a failed batch keeps nothing; when it did not, the operation
// must succeed as usual. It then lifts the fault and checks that the node
// serves the rest. Result.Faults counts the faults that fired, and
// Result.Pairs names each with the operation that met it. This file
// holds what they share: arming and lifting a fault, and single calls
// that put what returned in the model. The faults a call meets are
// ops_fault.go's, those at a clean close ops_faultclose.go's, lying
// fsyncs ops_lie.go's.

// injected is a fault in force and what a call meeting it fails with.
type injected struct {
	*sim.Injection
	what  string // for the run's operations
	kind  string // the fault and the files it is on, for Result.Pairs
	cause error
}

// inject arms f on the run's disk.
func (r *runner) inject(f sim.Fault) *injected {
	in := &injected{Injection: r.d.Inject(f), cause: causeOf(f.Err, f.Short)}
	in.what = fmt.Sprintf("%v on %s of %s", in.cause, f.Op, f.Path)
	in.kind = fmt.Sprintf("%v on %s of %s", in.cause, f.Op, fileClass(f.Path))
	if f.Lie {
		in.what = fmt.Sprintf("lying %s of %s", f.Op, f.Path)
		in.kind = fmt.Sprintf("lying %s of %s", f.Op, fileClass(f.Path))
	}
	if f.Short > 0 {
		in.what += fmt.Sprintf(" (%d bytes written)", f.Short)
	}
	if f.Sticky || f.Nth == 0 {
		in.what += ", every call"
	}
	r.logf("inject %s", in.what)
	return in
}

// lift removes the fault and counts it if it fired, with the operation
// that met it (met); it returns how many calls it failed.
func (r *runner) lift(in *injected, met string) int {
	in.Remove()
	n := in.Fired()
	if n > 0 {
		r.res.Faults++
		r.res.Pairs = append(r.res.Pairs, met+": "+in.kind)
	}
	r.logf("lift %s: met %d times", in.what, n)
	return n
}

// fileClass names the files a fault's path pattern stands for, without
// their topic and partition.
func fileClass(p string) string {
	base := strings.TrimSuffix(path.Base(p), ".tmp")
	switch {
	case base == "*"+wire.SegmentFileSuffix:
		return "a segment"
	case base == "*":
		return "a partition's files"
	case base == "consumer.a*":
		return "consumer.ahead or consumer.acked"
	case path.Dir(path.Dir(p)) == path.Join(dataDir, wire.TopicsDirName):
		return "a partition directory"
	}
	return strings.TrimSuffix(base, "*")
}

// attempt runs call once, again while it answers busy for want of a slot
// the fault did not cause (a log in use holding the only one), and
// reports whether the fault fired during it.
func (r *runner) attempt(in *injected, call func() error) (err error, fired bool) {
	for try := 0; ; try++ {
		synctest.Wait() // as retryBusy: the bubble at rest before the call
		before := in.Fired()
		err = call()
		fired = in.Fired() > before
		if fired || !errors.Is(err, runtime.ErrBusy) || try == 100 {
			return err, fired
		}
		synctest.Wait()
	}
}

// poisonedNow reports whether t/pi's open log is one a failed fdatasync
// poisoned: its produces are refused, so a fault meant for a commit
// would never be met.
func (r *runner) poisonedNow(t *topicModel, pi int) bool {
	l, open := r.n.LogIfOpen(t.name, pi)
	return open && l == t.parts[pi].flt.poisoned
}

// openLog opens t/pi's log (a fault then meets the operation, not the
// open's recovery) and checks its high watermark.
func (r *runner) openLog(t *topicModel, pi int) {
	var hwm int64
	err := retryBusy(func() (err error) { hwm, err = r.n.HighWatermark(r.ctx, t.name, pi); return err })
	r.must(fmt.Sprintf("open %s/%d", t.name, pi), err)
	if hwm != t.parts[pi].committed {
		r.failf("open %s/%d: high watermark %d, want %d", t.name, pi, hwm, t.parts[pi].committed)
	}
}

// closeIdle leaves the node idle past IdleEvictAfter: idle eviction closes
// every log nobody used meanwhile.
func (r *runner) closeIdle() {
	r.pauseFor(r.odd(idleEvictAfter+evictEvery), "idle eviction")
}

// pauseFor advances the clock by d inside an operation, then takes up
// what it did (leases run out, sweeps moved log starts) as between two.
func (r *runner) pauseFor(d time.Duration, why string) {
	r.logf("sleep %v: %s", d, why)
	r.sleep(d)
	r.forgetExpired()
	r.checkAll(false)
}

// produceOnce commits count records to t/pi once and, when it lands,
// checks its offsets and puts it in the model.
func (r *runner) produceOnce(t *topicModel, pi, count int) error {
	p := t.parts[pi]
	recs := make([]partition.Record, count)
	for i := range recs {
		recs[i] = partition.Record{Value: value(t.name, t.gen, pi, p.committed+int64(i))}
	}
	base, err := r.n.Produce(r.ctx, t.name, pi, recs)
	r.logf("produce %s/%d %d records: base %d (%v)", t.name, pi, count, base, err)
	if err != nil {
		return err
	}
	if base != p.committed {
		r.failf("produce %s/%d landed at %d, want %d (offsets dense; a failed batch keeps nothing)", t.name, pi, base, p.committed)
	}
	p.committed += int64(count)
	now := time.Now()
	for range count {
		p.commitAt = append(p.commitAt, now)
	}
	return nil
}

// readBack reads t/pi from its start and checks what it serves.
func (r *runner) readBack(t *topicModel, pi int) {
	from := t.parts[pi].start
	var res partition.ReadResult
	err := retryBusy(func() (err error) { res, err = r.n.Read(r.ctx, t.name, pi, from, 100, 1<<20); return err })
	r.logf("read %s/%d from %d: %d records (%v)", t.name, pi, from, len(res.Records), err)
	if errors.Is(err, partition.ErrOffsetDeleted) && !t.parts[pi].unbounded {
		return // a sweep moved the start meanwhile (checked by checkAll)
	}
	r.must("read", err)
	r.checkServed(t, pi, from, res)
}

// servesRest checks, while a fault of t/pi is in force, that another
// partition takes a produce and, with read, that reads of t/pi go on.
func (r *runner) servesRest(t *topicModel, pi int, read bool) {
	if read {
		r.readBack(t, pi)
	}
	for _, o := range r.topics {
		for oi := range o.parts {
			if (o != t || oi != pi) && !r.poisonedNow(o, oi) {
				r.must("produce beside the fault", retryBusy(func() error { return r.produceOnce(o, oi, 1+r.rng.IntN(5)) }))
				return
			}
		}
	}
}

// ackOnce acks offsets of t/pi once and, when it returns, puts the acks in
// the model and checks the frontier.
func (r *runner) ackOnce(t *topicModel, pi int, offsets []int64) error {
	p := t.parts[pi]
	frontier, err := r.n.Ack(r.ctx, t.name, pi, offsets...)
	r.logf("ack %s/%d %s: frontier %d (%v)", t.name, pi, offsetsString(offsets), frontier, err)
	if err != nil {
		return err
	}
	p.ackedNow(offsets)
	p.start = r.describe(t)[pi].StartOffset // a sweep may have run since the last check
	r.checkFrontier(t, pi, frontier, "ack")
	return nil
}

// retentionOnce sets t's retention bounds once and, when the change
// returns, checks its record and puts it in the model.
func (r *runner) retentionOnce(t *topicModel, ret runtime.Retention) error {
	rec, err := r.n.UpdateRetention(r.ctx, t.name, func(runtime.Retention) (runtime.Retention, error) { return ret, nil })
	r.logf("retention %s: %d ms, %d B (%v)", t.name, ret.Ms, ret.Bytes, err)
	if err != nil {
		return err
	}
	if rec.RetentionMs != ret.Ms || rec.RetentionBytes != ret.Bytes {
		r.failf("retention %s: record says %d ms %d B", t.name, rec.RetentionMs, rec.RetentionBytes)
	}
	t.retMs, t.retBytes, t.retSince = ret.Ms, ret.Bytes, time.Now()
	if ret.Ms != 0 || ret.Bytes != 0 {
		for _, p := range t.parts {
			p.unbounded = false
		}
	}
	return nil
}
