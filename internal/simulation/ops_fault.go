package simulation

import (
	"errors"
	"path"
	"slices"
	"syscall"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// The faults a call meets, and its answer (ops_faultkit.go says how a
// fault is armed, met and lifted).

// faultWrite fails the writes of a produce: EIO, ENOSPC (with or without
// some bytes written first) or a short write on the frame's write to the
// segment, or EIO on the hwm file's release (its truncate, at the first
// commit after an open), once or for up to three produces in a row. Each
// produce that meets it answers commit_failed (no_space for ENOSPC) and
// keeps nothing; between them the partition's reads and another
// partition's produces are served; once the fault is lifted the same
// batch lands at the offsets it was refused.
func (r *runner) faultWrite() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	if r.poisonedNow(t, pi) {
		return
	}
	dir := partDir(t, pi)
	segments := path.Join(dir, "*"+wire.SegmentFileSuffix)
	var f sim.Fault
	switch r.rng.IntN(5) {
	case 0:
		f = sim.Fault{Op: sim.OpWrite, Path: segments, Err: syscall.EIO}
	case 1:
		f = sim.Fault{Op: sim.OpWrite, Path: segments, Err: syscall.ENOSPC, Short: r.rng.IntN(2) * (1 + r.rng.IntN(200))}
	case 2:
		f = sim.Fault{Op: sim.OpWrite, Path: segments, Short: 1 + r.rng.IntN(200)}
	default:
		if _, open := r.n.LogIfOpen(t.name, pi); open {
			r.closeIdle() // the release comes at the first commit after an open
		}
		f = sim.Fault{Op: sim.OpTruncate, Path: path.Join(dir, wire.HWMFileName), Err: syscall.EIO}
	}
	r.openLog(t, pi)
	tries := 1 + r.rng.IntN(3)
	f.Nth, f.Sticky = 1, tries > 1
	in := r.inject(f)
	count := 1 + r.rng.IntN(50)
	for try := range tries {
		err, fired := r.attempt(in, func() error { return r.produceOnce(t, pi, count) })
		r.answer("produce under "+in.what, fired, true, err, commitFailed(in.cause))
		if err != nil {
			t.parts[pi].failedWrite()
		}
		if err == nil {
			break
		}
		if try+1 < tries {
			r.servesRest(t, pi, true)
		}
	}
	r.lift(in, "produce")
	r.must("produce after the fault", retryBusy(func() error { return r.produceOnce(t, pi, count) }))
}

// faultSync fails the fdatasync of a produce's commit (EIO or ENOSPC):
// the produce answers log_poisoned and keeps nothing, and the log refuses
// every produce from then on until it is reopened (the model expects it
// of every later produce: refused), while its reads go on. Half the time
// the operation reopens it at once (a restart, or idle eviction) and a
// produce lands; otherwise the poison stays for the operations that
// follow, until a restart, a crash or an eviction closes the log.
func (r *runner) faultSync() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	if r.poisonedNow(t, pi) {
		return
	}
	r.openLog(t, pi)
	errno := []error{syscall.EIO, syscall.ENOSPC}[r.rng.IntN(2)]
	in := r.inject(sim.Fault{Op: sim.OpSync, Path: path.Join(partDir(t, pi), "*"+wire.SegmentFileSuffix), Err: errno, Nth: 1})
	count := 1 + r.rng.IntN(50)
	err, fired := r.attempt(in, func() error { return r.produceOnce(t, pi, count) })
	r.lift(in, "produce")
	r.answer("produce under "+in.what, fired, true, err, logPoisoned)
	if err != nil {
		p.failedWrite()
	}
	if err == nil {
		return
	}
	l, open := r.n.LogIfOpen(t.name, pi)
	if !open {
		r.failf("produce %s/%d: the log its failed fdatasync poisoned closed by itself", t.name, pi)
	}
	p.flt.poisoned = l
	for range r.rng.IntN(3) {
		err := r.produceOnce(t, pi, count)
		if !r.refused(t, pi, err) {
			r.failf("produce %s/%d to a poisoned log: %v, want log_poisoned", t.name, pi, err)
		}
	}
	r.servesRest(t, pi, true)
	switch r.rng.IntN(4) {
	case 0:
		r.restart()
	case 1:
		r.closeIdle()
	default:
		return // the poison stays
	}
	if err := retryBusy(func() error { return r.produceOnce(t, pi, count) }); !r.refused(t, pi, err) {
		r.must("produce after a reopen", err)
	}
}

// faultCall fails what a call's first touch of a partition does: EMFILE
// on the opens of its files, met by a produce, a read, a queue consume or
// an ack; or EIO on what the consumer's first touch does (consumer.ahead's
// fdatasync or read in its recovery) or EIO or ENOSPC on consumer.lease's
// write (a queue's first lease raising its lease ids' floor), met by a
// consume or an ack. The partition's log is closed first (idle eviction)
// two times in three, so the call opens it. The fault fails one call or
// every call of up to three; each call that meets it answers busy
// (EMFILE) or an I/O error (500 internal) and does nothing (no record
// kept, none leased, no ack taken), and poisons nothing; once lifted,
// the same call succeeds. A close the open-log budget makes meanwhile may
// meet it in its write-out of consumer.ahead: its acks may be lost as at
// any failed close (checkLostAcks), and are leased again.
func (r *runner) faultCall() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	if r.poisonedNow(t, pi) {
		return
	}
	if _, open := r.n.LogIfOpen(t.name, pi); open && r.rng.IntN(3) > 0 {
		r.closeIdle()
	}
	tries := 1 + r.rng.IntN(3)
	dir := partDir(t, pi)
	f, want, op := sim.Fault{Op: sim.OpOpen, Path: path.Join(dir, "*"), Err: syscall.EMFILE}, busy, r.rng.IntN(4)
	if r.rng.IntN(3) == 0 {
		f.Path, f.Err, op = path.Join(dir, wire.ConsumerAheadFileName), syscall.EIO, 2+r.rng.IntN(2)
		switch r.rng.IntN(4) {
		case 0:
			f.Op = sim.OpSync
		case 1:
			f.Op = sim.OpRead
		default:
			f.Op, f.Path = sim.OpWrite, path.Join(dir, wire.ConsumerLeaseFileName+".tmp")
			f.Err = []error{syscall.EIO, syscall.ENOSPC}[r.rng.IntN(2)]
		}
		want = internal(f.Err)
	}
	f.Nth, f.Sticky = 1, tries > 1
	in := r.inject(f)
	var call func() error
	met := "produce"
	switch {
	case op == 1 && p.committed > 0:
		met = "read"
		call = func() error {
			res, err := r.n.Read(r.ctx, t.name, pi, p.start, 100, 1<<20)
			r.logf("read %s/%d from %d: %d records (%v)", t.name, pi, p.start, len(res.Records), err)
			if errors.Is(err, partition.ErrOffsetDeleted) && !p.unbounded {
				return nil // a sweep moved the start since it was read (checked by checkAll)
			}
			if err == nil {
				r.checkServed(t, pi, p.start, res)
			}
			return err
		}
	case op == 3 && p.committed > 0:
		met = "ack"
		offsets := []int64{r.rng.Int64N(p.committed)}
		call = func() error { return r.ackOnce(t, pi, offsets) }
	case op >= 2:
		met = "consume"
		opts := runtime.ConsumeOptions{Partition: pi, MaxRecords: 1 + r.rng.IntN(60), Lease: r.odd(time.Duration(1+r.rng.IntN(20)) * time.Second)}
		call = func() error {
			got, err := r.n.Consume(r.ctx, t.name, opts)
			r.logf("consume %s partition %d max %d lease %v: %s (%v)", t.name, pi, opts.MaxRecords, opts.Lease, leasedString(got), err)
			if err == nil {
				r.leased(t, opts, got)
			} else if len(got) > 0 {
				r.failf("consume %s/%d: %v, with %d records leased", t.name, pi, err, len(got))
			}
			return err
		}
	default:
		count := 1 + r.rng.IntN(50)
		call = func() error { return r.produceOnce(t, pi, count) }
	}
	at, set, closed := time.Now(), aheadOf(p), false
	for try := range tries {
		err, fired := r.attempt(in, call)
		r.answer(met+" under "+in.what, fired, false, err, want)
		if err == nil {
			break
		}
		if try+1 < tries {
			before, _ := r.n.LogIfOpen(t.name, pi)
			r.servesRest(t, pi, false)
			if after, _ := r.n.LogIfOpen(t.name, pi); before != nil && after != before {
				closed = true // by the budget: its write-out of consumer.ahead may meet the fault
			}
		}
	}
	if r.lift(in, met) > 0 && closed {
		if lost := r.checkLostAcks(t, pi, at, set); len(lost) > 0 {
			r.logf("the close lost %d acks of %s/%d: %s", len(lost), t.name, pi, offsetsString(lost))
			r.leasedAgain(t, pi, lost)
		}
	}
	r.must(met+" after the fault", retryBusy(call))
}

// faultMeta fails a write of the metastore's file or of its copy (EIO,
// ENOSPC, a short write) or their fdatasync (EIO), once, under a retention
// change or a topic's delete: the change answers an I/O error (500
// internal) and changes nothing (the record as it was, checked by every
// describe; the topic serving every record after a failed delete), and
// the node goes on; once the fault is lifted, the change succeeds.
func (r *runner) faultMeta() {
	t := r.pick()
	file := path.Join(dataDir, []string{"metastore.json", "metastore.json.copy"}[r.rng.IntN(2)]+".tmp")
	f := sim.Fault{Op: sim.OpWrite, Path: file, Nth: 1}
	switch r.rng.IntN(4) {
	case 0:
		f.Err = syscall.EIO
	case 1:
		f.Err = syscall.ENOSPC
	case 2:
		f.Short = 1 + r.rng.IntN(100)
	default:
		f.Op, f.Err = sim.OpSync, syscall.EIO
	}
	in := r.inject(f)
	if r.rng.IntN(3) > 0 {
		ret := runtime.Retention{}
		if r.rng.IntN(2) == 0 {
			ret.Ms = int64(500 + r.rng.IntN(10000))
		}
		if r.rng.IntN(2) == 0 {
			ret.Bytes = int64(512 + r.rng.IntN(12<<10))
		}
		err, fired := r.attempt(in, func() error { return r.retentionOnce(t, ret) })
		r.lift(in, "retention change")
		r.answer("retention change under "+in.what, fired, true, err, internal(in.cause))
		r.describe(t) // the record as the model has it: unchanged, or changed once
		if err != nil {
			r.must("retention after the fault", retryBusy(func() error { return r.retentionOnce(t, ret) }))
		}
		return
	}
	err, fired := r.attempt(in, func() error {
		err := r.n.DeleteTopic(r.ctx, t.name)
		r.logf("delete %s (%v)", t.name, err)
		return err
	})
	r.lift(in, "topic delete")
	r.answer("delete under "+in.what, fired, true, err, internal(in.cause))
	if err != nil {
		for pi := range t.parts {
			r.readAll(t, pi)
			r.checkConsumer(t, pi)
		}
		r.logf("delete %s", t.name)
		r.must("delete after the fault", retryBusy(func() error { return r.n.DeleteTopic(r.ctx, t.name) }))
	}
	r.topics = slices.DeleteFunc(r.topics, func(x *topicModel) bool { return x == t })
	r.create(t.name)
}
