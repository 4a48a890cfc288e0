package simulation

import (
	"path"
	"slices"
	"syscall"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// faultWriteOut fails the background write-outs of one partition: its
// cursors' position files (cursor.*) or the queue consumer's progress
// (consumer.ahead's tick and write-out, consumer.offset's levelling), by
// EIO or ENOSPC on every write, a short write of each, or EIO on every
// fdatasync. With the fault in force it commits the topic's cursors or
// leases and acks records, all in memory, and lets 1 to 2 s pass, so the
// write-outs meet the fault (no answer does: they are the node's own).
// Then either:
//
//   - the fault is lifted; every cursor and the consumer's progress must
//     still be exactly the model's (a failed write-out loses nothing in
//     memory); a write-out interval later, a crash must find them as
//     after any crash (the failed write-outs were retried), or
//   - two faults at once, the second a crash: the fault stays until the
//     crash image is taken, and the crash must find what the write-outs
//     before the fault was armed made durable, no less: no ack lost that
//     returned more than ackWindow before the arm, no cursor further back
//     than a position it stood at within cursorWindow before the arm, and
//     never forward of where it stood.
func (r *runner) faultWriteOut() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	if p.committed == 0 {
		return
	}
	cursors := r.rng.IntN(2) == 0
	if cursors && len(t.cursors.by) == 0 {
		r.cursorCreateOn(t)
		if len(t.cursors.by) == 0 {
			return
		}
	}
	dir := partDir(t, pi)
	pat := path.Join(dir, "cursor.*")
	if !cursors {
		pat = path.Join(dir, "consumer.[ao]*") // consumer.ahead, consumer.offset; consumer.acked only at a close
	}
	var f sim.Fault
	switch r.rng.IntN(4) {
	case 0:
		f = sim.Fault{Op: sim.OpWrite, Path: pat, Err: syscall.EIO}
	case 1:
		f = sim.Fault{Op: sim.OpWrite, Path: pat, Err: syscall.ENOSPC}
	case 2:
		short := 8 // short of consumer.offset's 8 bytes (or of consumer.ahead's slot)
		if cursors {
			short = wire.CursorSlotSize // short of a cursor's slot
		}
		f = sim.Fault{Op: sim.OpWrite, Path: pat, Short: 1 + r.rng.IntN(short-1)}
	default:
		f = sim.Fault{Op: sim.OpSync, Path: pat, Err: syscall.EIO}
	}
	// The log open and its consumer and cursors loaded before the arm: a
	// first touch meeting the fault is faultCall's, answered; this one's
	// is the node's own background write-outs.
	r.consumerState(t, pi)
	for _, name := range cursorNames {
		r.checkCursor(t, name)
	}
	r.settle()
	armed := time.Now()
	allowed := map[*cursorModel][]int64{} // by cursor of t: positions a crash may leave in pi
	for _, name := range cursorNames {
		if c := t.cursors.get(name); c != nil {
			for _, h := range c.held[pi] {
				if c.mayHold(pi, h.pos, armed) {
					allowed[c] = append(allowed[c], h.pos)
				}
			}
		}
	}
	ahead := r.aheadNow()
	in := r.inject(f)
	for range 1 + r.rng.IntN(3) {
		if cursors {
			name := cursorNames[r.rng.IntN(len(cursorNames))]
			off := p.start + r.rng.Int64N(p.committed-p.start+1)
			r.commitCursor(t, name, pi, off)
			if c := t.cursors.get(name); c != nil {
				allowed[c] = append(allowed[c], c.pos[pi])
			}
		} else {
			r.leaseAndAck(t, pi)
		}
	}
	// Under the idle eviction's 3 s: a close meeting the fault is
	// faultClose's.
	d := r.odd(time.Duration(1000+r.rng.IntN(1000)) * time.Millisecond)
	r.logf("sleep %v", d)
	r.sleep(d)
	r.forgetExpired()
	met := "cursor write-out"
	if !cursors {
		met = "consumer write-out"
	}
	if r.rng.IntN(2) == 0 {
		r.lift(in, met)
		r.checkConsumer(t, pi)
		r.checkCursors(t)
		d := r.odd(cursorWindow + ackWindow)
		r.logf("sleep %v, then crash", d)
		r.sleep(d)
		r.forgetExpired()
		r.crashOwner()
		return
	}
	r.crashOwnerThen(armed, ahead, func() { r.lift(in, met+", then a crash") }, t, pi, allowed)
}

// cursorCreateOn creates a cursor of t, as cursorCreate does.
func (r *runner) cursorCreateOn(t *topicModel) {
	name := cursorNames[r.rng.IntN(len(cursorNames))]
	r.createCursor(t, name)
}

// aheadNow is each partition's acked-ahead set size, as a crash's
// checks take it (crash).
func (r *runner) aheadNow() map[*partModel]int {
	ahead := map[*partModel]int{}
	for _, o := range r.topics {
		for _, q := range o.parts {
			low := int64(0)
			for q.isAcked(low) {
				low++
			}
			ahead[q] = len(q.acked) - int(low)
		}
	}
	return ahead
}

// crashOwner crashes the node (a cluster run's: the member the runner is
// on) as crash does.
func (r *runner) crashOwner() {
	if r.cl == nil {
		r.crash()
		return
	}
	r.onMember(r.cl.cur, r.crash)
}

// crashOwnerThen crashes the node with a fault in force, lifted (lift)
// once the image is taken, and checks what the node holds as from a
// crash at armed: t/pi's acks and cursors (each at a position of
// allowed), every other partition as after any crash.
//
// A short or torn write-out leaves the cursor where it stood or where
// the write-out was putting it: the file's two checksummed slots
// (docs/design.md, "Fan-out cursors") keep the other slot whole.
func (r *runner) crashOwnerThen(armed time.Time, ahead map[*partModel]int, lift func(), t *topicModel, pi int, allowed map[*cursorModel][]int64) {
	crash := func() {
		plan := sim.CrashPlan{Data: sim.DataLoss(r.rng.IntN(3)), Seed: r.rng.Uint64(), Garbage: r.rng.IntN(2) == 0,
			KeepNameOps: r.rng.IntN(6) - 1}
		r.logf("crash with the fault in force: %+v", plan)
		at := time.Now()
		r.crashNode(plan)
		lift()
		faulted := t.parts[pi]
		r.afterCrashOf(func(q *partModel) time.Time { // t/pi: every ack older than the window before the arm kept
			if q == faulted {
				return armed
			}
			return at // every other partition as after any crash
		}, ahead)
		others := slices.DeleteFunc(slices.Clone(r.topics), func(o *topicModel) bool { return o == t })
		all := r.topics
		r.topics = others
		r.cursorsAfterCrash(at)
		r.topics = all
		r.on(t)
		for _, name := range cursorNames {
			c := t.cursors.get(name)
			if c == nil {
				r.checkCursor(t, name)
				continue
			}
			r.res.Live.CursorCrashes++
			got := r.cursorPositions(t, name)
			for _, g := range got {
				if g.Partition == pi && !slices.Contains(allowed[c], g.Position) {
					r.failf("after a crash with cursor write-outs failing, cursor %s of %s/%d: position %d, not one it stood at within %v before the fault or since (%v)",
						name, t.name, pi, g.Position, cursorWindow, allowed[c])
				}
				if g.Partition != pi && !c.mayHold(g.Partition, g.Position, at) {
					r.failf("after the crash, cursor %s of %s/%d: position %d, not one it held within %v before the crash",
						name, t.name, g.Partition, g.Position, cursorWindow)
				}
				c.pos[g.Partition] = g.Position
			}
			c.reset()
		}
		r.checkAll(true)
	}
	if r.cl == nil {
		crash()
		return
	}
	r.onMember(r.cl.cur, crash)
}
