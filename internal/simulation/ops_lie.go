package simulation

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// lieCost is what lying fsyncs of one kind of a partition's files may
// cost at a power loss, which the model then does not hold the node to
// (docs/design.md, "Drives that lie about fsync"; the campaign's oracle
// charges a lie the same way, docs/durability.md, "The invariants").
type lieCost struct {
	records bool // records committed since the first lie (and with them the acks: a frontier above the high watermark is rejected)
	acks    bool // the partition's acks, whatever their age
	ids     bool // its lease ids may repeat (consumer.lease's floor lost)
	// frames: the lies leave frames unsynced, so the crash tears sectors
	// into zeros, never garbage: garbage would take the honest frame
	// sharing a sector with them, media damage no format without padding
	// survives (the campaign asks no I4 of such images either).
	frames bool
}

// lieCrash makes the fdatasyncs of one kind of a partition's files lie
// (report success, persist nothing) for one to four operations (produces
// to it, a lease and acks, a pause for the consumer's write-outs, a clean
// restart), then crashes the node. What the lies covered may be lost and
// is counted in the run's operations, never a violation:
//
//   - a segment's fdatasync: records committed since the first lie (the
//     high watermark after the crash anywhere from where it stood then to
//     where it stands; the records served below it as produced) and the
//     partition's acks; when records were lost, the topic is deleted and
//     created again (chargeLies says why);
//   - the partition directory's: the same, and its lease ids may repeat
//     (consumer.lease is replaced by a rename);
//   - consumer.ahead's or consumer.acked's: the partition's acks;
//   - consumer.lease's: its lease ids may repeat;
//   - the hwm file's or consumer.offset's: nothing (recovery trusts
//     neither over what it checks).
//
// Everything else is checked as after any crash.
func (r *runner) lieCrash() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	dir := partDir(t, pi)
	f := sim.Fault{Op: sim.OpSync, Lie: true}
	var cost lieCost
	switch r.rng.IntN(6) {
	case 0:
		f.Path, cost = path.Join(dir, "*"+wire.SegmentFileSuffix), lieCost{records: true, acks: true, frames: true}
	case 1:
		f.Op, f.Path, cost = sim.OpSyncDir, dir, lieCost{records: true, acks: true, ids: true}
	case 2:
		f.Path, cost = path.Join(dir, "consumer.a*"), lieCost{acks: true}
	case 3:
		f.Path, cost = path.Join(dir, wire.ConsumerLeaseFileName+"*"), lieCost{ids: true}
	case 4:
		f.Path = path.Join(dir, wire.HWMFileName)
	default:
		f.Path = path.Join(dir, wire.ConsumerOffsetFileName)
	}
	honest := p.committed
	in := r.inject(f)
	for range 1 + r.rng.IntN(4) {
		switch r.rng.IntN(6) {
		case 0, 1, 2:
			count := 1 + r.rng.IntN(50)
			if err := retryBusy(func() error { return r.produceOnce(t, pi, count) }); !r.refused(t, pi, err) {
				r.must("produce", err)
			}
		case 3:
			r.leaseAndAck(t, pi)
		case 4:
			r.pauseFor(r.odd(writeOutEvery+time.Duration(r.rng.IntN(1500))*time.Millisecond), "write-outs")
		default:
			r.restart()
		}
	}
	fired := r.lift(in, "a crash after") > 0
	plan := sim.CrashPlan{Data: sim.DataLoss(r.rng.IntN(3)), Seed: r.rng.Uint64(), Garbage: r.rng.IntN(2) == 0 && !(fired && cost.frames),
		KeepNameOps: r.rng.IntN(6) - 1}
	r.logf("crash: %+v", plan)
	at := time.Now()
	ahead := map[*partModel]int{}
	for _, o := range r.topics {
		for _, op := range o.parts {
			ahead[op] = aheadOf(op)
		}
	}
	r.crashNode(plan)
	if fired {
		r.chargeLies(t, pi, honest, cost)
	}
	r.afterCrash(at, ahead)
	r.cursorsAfterCrash(at)
	r.checkAll(true)
}

// chargeLies takes back, after the crash, what lies of cost's kind may
// have lost of t/pi (records committed from honest on), checking the
// node kept the rest, and logs what was lost.
func (r *runner) chargeLies(t *topicModel, pi int, honest int64, cost lieCost) {
	p := t.parts[pi]
	records, acks := int64(0), 0
	if cost.records {
		var hwm int64
		err := retryBusy(func() (err error) { hwm, err = r.n.HighWatermark(r.ctx, t.name, pi); return err })
		r.must(fmt.Sprintf("open %s/%d", t.name, pi), err)
		if hwm < honest || hwm > p.committed {
			r.failf("after lies and a crash %s/%d: high watermark %d; the lies began at %d, %d was committed",
				t.name, pi, hwm, honest, p.committed)
		}
		records = p.committed - hwm
		p.committed, p.commitAt = hwm, p.commitAt[:hwm]
		if gap := r.gapsAfterLies(t, pi, honest); records > 0 || gap > 0 {
			// The model follows no record the lies lost: a gap is settled
			// by a consume unread, and an offset produced again may meet
			// an ack of the lost record that the consumer's files still
			// hold (recovery passes over acks above the high watermark,
			// and takes them back once it grows past them again). The
			// topic starts over.
			r.logf("the lies cost %s/%d: %d records, and %d more read as a gap; delete %s", t.name, pi, records, gap, t.name)
			r.must("delete "+t.name, retryBusy(func() error { return r.n.DeleteTopic(r.ctx, t.name) }))
			r.topics = slices.DeleteFunc(r.topics, func(x *topicModel) bool { return x == t })
			r.create(t.name)
			return
		}
	}
	if cost.acks {
		_, nodeAcked := r.consumerState(t, pi)
		for o := range p.acked {
			if !nodeAcked(o) {
				delete(p.acked, o)
				acks++
			}
		}
	}
	if cost.ids {
		p.ids = map[uint64]bool{}
	}
	r.logf("the lies cost %s/%d: %d records, %d acks (lease ids unchecked: %v)", t.name, pi, records, acks, cost.ids)
}

// gapsAfterLies reads t/pi from where the lies began to its high
// watermark: every record served must be the one produced there; what a
// lost write of a segment's last frames left below a later segment reads
// as a gap (ErrUnreadable, never renumbered: invariant I8), whose length
// it returns.
func (r *runner) gapsAfterLies(t *topicModel, pi int, honest int64) (gap int64) {
	p := t.parts[pi]
	for o := max(honest, r.describe(t)[pi].StartOffset); o < p.committed; {
		var res partition.ReadResult
		err := retryBusy(func() (err error) { res, err = r.n.Read(r.ctx, t.name, pi, o, 1000, 1<<20); return err })
		var u *partition.UnreadableError
		if errors.As(err, &u) {
			if u.Next <= o || u.Next > p.committed {
				r.failf("after lies and a crash %s/%d: offset %d unreadable, next %d, high watermark %d", t.name, pi, o, u.Next, p.committed)
			}
			gap, o = gap+u.Next-o, u.Next
			continue
		}
		r.must(fmt.Sprintf("read %s/%d from %d", t.name, pi, o), err)
		r.checkServed(t, pi, o, res)
		o += int64(len(res.Records))
	}
	return gap
}
