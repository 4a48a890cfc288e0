package simulation

import (
	"errors"
	"path"
	"syscall"
	"time"

	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// closeWay is how a partition's log is closed cleanly: by the open-log
// budget (the other partitions opened until it is the least recently
// used one), by idle eviction, or by the node's restart.
type closeWay int

const (
	byBudget closeWay = iota
	byIdle
	byRestart
)

func (w closeWay) String() string {
	return [...]string{"the open-log budget", "idle eviction", "a restart"}[w]
}

// drawClose draws a way to close a log; the budget only when the run has
// more partitions than it holds.
func (r *runner) drawClose() closeWay {
	parts := 0
	for _, t := range r.topics {
		parts += len(t.parts)
	}
	ways := []closeWay{byIdle, byRestart}
	if parts > r.maxOpen {
		ways = append(ways, byBudget, byBudget)
	}
	return ways[r.rng.IntN(len(ways))]
}

// closeLog closes t/pi's log the way w says and reports whether it is
// closed. A restart's close may fail only with what the model expects
// and allow passes; then closed runs (a fault lifted before the new node
// starts), and the new node is started, not checked.
func (r *runner) closeLog(t *topicModel, pi int, w closeWay, allow func(error) bool, closed func()) bool {
	r.logf("close %s/%d by %v", t.name, pi, w)
	switch w {
	case byRestart:
		r.settle()
		r.must("close", r.closeNode(allow))
		r.n = nil
		if closed != nil {
			closed()
		}
		r.start()
		return true
	case byIdle:
		r.closeIdle()
	case byBudget:
		for range 2 {
			for _, o := range r.topics {
				for oi := range o.parts {
					if _, open := r.n.LogIfOpen(t.name, pi); !open {
						return true
					}
					if o != t || oi != pi {
						r.openLog(o, oi)
					}
				}
			}
		}
	}
	_, open := r.n.LogIfOpen(t.name, pi)
	return !open
}

// leaseAndAck leases records of t/pi and acks some of them (every one but
// the lowest, or about two in three), so acks wait for a write-out.
func (r *runner) leaseAndAck(t *topicModel, pi int) {
	if t.parts[pi].committed == 0 {
		return
	}
	got := r.consumeWith(t, runtime.ConsumeOptions{Partition: pi, MaxRecords: 1 + r.rng.IntN(60),
		Lease: r.odd(time.Duration(1+r.rng.IntN(20)) * time.Second)})
	allButLowest := r.rng.IntN(2) == 0
	var offsets []int64
	for i, rec := range got {
		if (allButLowest && i > 0) || (!allButLowest && r.rng.IntN(3) > 0) {
			offsets = append(offsets, rec.Offset)
		}
	}
	if len(offsets) > 0 {
		r.must("ack", retryBusy(func() error { return r.ackOnce(t, pi, offsets) }))
	}
}

// faultClose fails what a clean close of a partition's log writes: the
// consumer progress (consumer.ahead's write, EIO, ENOSPC or short, or its
// fdatasync; consumer.offset's levelling; consumer.acked's write, when
// the acked-ahead set is over a slot) or the hwm file (EIO or short),
// after leases and acks, the close made by the open-log budget, idle
// eviction or a restart (for idle eviction the fault fails every call
// until the close, the committer's ticks included). The close goes on
// (a restart's close may report a failed hwm write), the partition serves
// every record after it, and its progress may have lost what the close
// could not write out, as checkLostAcks says, nothing more. The queue
// outlives an eviction: a consume then leases every record whose ack was
// lost again (docs/design.md, "Queue consume": acks a close failed to
// write out are delivered again, never passed over).
func (r *runner) faultClose() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	r.leaseAndAck(t, pi)
	dir := partDir(t, pi)
	ahead, acked := path.Join(dir, wire.ConsumerAheadFileName), path.Join(dir, wire.ConsumerAckedFileName+".tmp")
	f, progress := sim.Fault{Op: sim.OpWrite, Path: ahead, Err: syscall.EIO}, true
	switch r.rng.IntN(7) {
	case 1:
		f.Err, f.Short = syscall.ENOSPC, r.rng.IntN(2)*(1+r.rng.IntN(4096))
	case 2:
		f.Err, f.Short = nil, 1+r.rng.IntN(4096)
	case 3:
		f.Op = sim.OpSync
	case 4:
		f.Path = path.Join(dir, wire.ConsumerOffsetFileName)
	case 5:
		f.Path = acked
	case 6:
		f.Path, progress = path.Join(dir, wire.HWMFileName), false
		if r.rng.IntN(2) == 0 {
			f.Err, f.Short = nil, 1+r.rng.IntN(7)
		}
	}
	way := r.drawClose()
	f.Nth, f.Sticky = 1, way == byIdle
	at, set := time.Now(), aheadOf(p)
	in := r.inject(f)
	fired, lifted := false, false
	lift := func() {
		if !lifted {
			fired, lifted = r.lift(in, "close by "+way.String()) > 0, true
		}
	}
	closed := r.closeLog(t, pi, way, func(err error) bool { return in.Fired() > 0 && errors.Is(err, in.cause) }, lift)
	lift()
	if fired && progress && closed {
		lost := r.checkLostAcks(t, pi, at, set)
		r.logf("the close lost %d acks of %s/%d: %s", len(lost), t.name, pi, offsetsString(lost))
		if way != byRestart && len(lost) > 0 {
			r.leasedAgain(t, pi, lost)
		}
	}
	if way == byRestart {
		r.checkAll(true)
		return
	}
	r.readAll(t, pi)
	r.checkConsumer(t, pi)
}

// leasedAgain checks that a consume of t/pi leases every record whose
// ack a failed close lost (unless retention deleted it, or the consume
// met its bounds first).
func (r *runner) leasedAgain(t *topicModel, pi int, lost []int64) {
	p := t.parts[pi]
	now, held := time.Now(), 0
	for o := range p.leases {
		if _, ok := p.leasedNow(o, now); ok {
			held++
		}
	}
	opts := runtime.ConsumeOptions{Partition: pi, MaxRecords: runtime.MaxLeasedPerPartition, MaxBytes: 1 << 30,
		Lease: r.odd(time.Duration(1+r.rng.IntN(20)) * time.Second)}
	got := r.consumeWith(t, opts)
	if held+len(got) >= runtime.MaxLeasedPerPartition {
		return
	}
	start := r.describe(t)[pi].StartOffset
	leased := map[int64]bool{}
	for _, rec := range got {
		leased[rec.Offset] = true
	}
	for _, o := range lost {
		if o >= start && !leased[o] {
			r.failf("consume %s/%d: offset %d, whose ack a failed close lost, was not leased again (%d leased)", t.name, pi, o, len(got))
		}
	}
}
