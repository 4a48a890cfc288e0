package simulation

import (
	"errors"
	"slices"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
)

// step draws one operation from the run's source and runs it.
func (r *runner) step() {
	if r.cl != nil {
		r.clusterStep()
		return
	}
	weights := []struct {
		w int
		f func()
	}{
		{25, r.produce}, {10, r.read}, {14, r.consume}, {12, r.ack}, {5, r.nack},
		{8, r.pause}, {3, r.changeRetention}, {2, r.retentionApplied}, {2, r.drain},
		{4, r.checkConsumers}, {2, r.restart}, {2, r.crash}, {1, r.recreate},
		{3, r.cursorCreate},
		{5, r.cursorRead},
		{3, r.cursorCommit},
		{1, r.cursorDelete},
		{2, r.cursorCheck},
		{3, r.longPoll},
		{3, r.waitConsume},
		{3, r.concurrentProduce},
		{1, r.diskFloor},
		{2, r.faultWrite},
		{1, r.faultSync},
		{1, r.faultCall},
		{2, r.faultClose},
		{1, r.faultMeta},
		{1, r.lieCrash},
		{r.bigAckWeight(), r.bigAck},
	}
	if r.big {
		weights[0].w = 90 // produce
	}
	total := 0
	for _, w := range weights {
		total += w.w
	}
	x := r.rng.IntN(total)
	for _, w := range weights {
		if x < w.w {
			w.f()
			return
		}
		x -= w.w
	}
}

// create creates a topic of 1 to 3 partitions, a new incarnation of name.
func (r *runner) create(name string) *topicModel {
	parts := 1 + r.rng.IntN(3)
	if r.big || r.cl != nil {
		parts = 1 // one partition takes every record: acked-ahead sets past a slot; or one member serves the topic
	}
	if r.cl != nil {
		m := r.pickMember()
		r.cl.meta.place = m.id
		r.use(m)
	}
	r.gens[name]++
	r.settle()
	rec, created, err := r.n.CreateTopic(r.ctx, name, parts, runtime.Retention{})
	r.must("create "+name, err)
	if !created {
		r.failf("create %s: not created", name)
	}
	t := &topicModel{name: name, gen: r.gens[name], incarnation: string(rec.Incarnation), retSince: time.Now()}
	for range parts {
		p := newPart()
		p.unbounded = true
		t.parts = append(t.parts, p)
	}
	r.topics = append(r.topics, t)
	r.logf("create %s (%d partitions): incarnation %s", name, parts, rec.Incarnation)
	return t
}

// recreate deletes a topic and creates its name again.
func (r *runner) recreate() {
	t := r.pick()
	r.logf("delete %s", t.name)
	r.must("delete "+t.name, retryBusy(func() error { return r.n.DeleteTopic(r.ctx, t.name) }))
	r.topics = slices.DeleteFunc(r.topics, func(x *topicModel) bool { return x == t })
	r.create(t.name)
}

// produce commits 1 to 50 records to one partition.
func (r *runner) produce() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	count := 1 + r.rng.IntN(50)
	recs := make([]partition.Record, count)
	for i := range recs {
		recs[i] = partition.Record{Value: value(t.name, t.gen, pi, p.committed+int64(i))}
	}
	var base int64
	err := retryBusy(func() (err error) { base, err = r.n.Produce(r.ctx, t.name, pi, recs); return err })
	r.logf("produce %s/%d %d records: base %d (%v)", t.name, pi, count, base, err)
	if r.refused(t, pi, err) {
		return // a poisoned log's refusal: nothing kept (check_fault.go)
	}
	r.must("produce", err)
	if base != p.committed {
		r.failf("produce %s/%d landed at %d, want %d (offsets dense)", t.name, pi, base, p.committed)
	}
	p.committed += int64(count)
	now := time.Now()
	for range count {
		p.commitAt = append(p.commitAt, now)
	}
}

// read fetches from a random offset near or above the log's start.
func (r *runner) read() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	from := max(p.start-3, 0) + r.rng.Int64N(p.committed-max(p.start-3, 0)+1)
	maxRecords := 1 + r.rng.IntN(100)
	var res partition.ReadResult
	err := retryBusy(func() (err error) {
		res, err = r.n.Read(r.ctx, t.name, pi, from, maxRecords, 1<<20)
		return err
	})
	r.logf("read %s/%d from %d max %d: %d records (%v)", t.name, pi, from, maxRecords, len(res.Records), err)
	if errors.Is(err, partition.ErrOffsetDeleted) {
		start := r.describe(t)[pi].StartOffset
		if from >= start {
			r.failf("read %s/%d from %d: offset deleted, but the log starts at %d", t.name, pi, from, start)
		}
		return
	}
	r.must("read", err)
	r.checkServed(t, pi, from, res)
}

// checkServed checks a read's answer from offset from: dense, below the
// promised high watermark, every byte as produced; at least one record
// unless from is the high watermark.
func (r *runner) checkServed(t *topicModel, pi int, from int64, res partition.ReadResult) {
	p := t.parts[pi]
	if res.HighWatermark != p.committed {
		r.failf("read %s/%d: high watermark %d, want %d", t.name, pi, res.HighWatermark, p.committed)
	}
	if len(res.Records) == 0 && from < p.committed {
		r.failf("read %s/%d from %d: nothing, high watermark %d", t.name, pi, from, p.committed)
	}
	for i, rec := range res.Records {
		r.checkRecord(t, pi, from+int64(i), rec)
	}
}

// checkRecord checks one served record against what was produced at want.
func (r *runner) checkRecord(t *topicModel, pi int, want int64, rec partition.ReadRecord) {
	if rec.Offset != want {
		r.failf("%s/%d: record at offset %d, want %d (offsets dense)", t.name, pi, rec.Offset, want)
	}
	if want < 0 || want >= t.parts[pi].committed {
		r.failf("%s/%d: record at %d, high watermark %d", t.name, pi, want, t.parts[pi].committed)
	}
	if exp := t.parts[pi].expect(t, pi, want); string(rec.Value) != string(exp) || len(rec.Key) != 0 {
		r.failf("%s/%d offset %d: served %q (key %q), produced %q", t.name, pi, want, rec.Value, rec.Key, exp)
	}
}

// consume leases records of one partition or of any.
func (r *runner) consume() {
	t := r.pick()
	opts := runtime.ConsumeOptions{Partition: runtime.AnyPartition, MaxRecords: 1 + r.rng.IntN(60),
		Lease: r.odd(time.Duration(1+r.rng.IntN(20)) * time.Second)}
	if r.rng.IntN(2) == 0 {
		opts.Partition = r.rng.IntN(len(t.parts))
	}
	r.consumeWith(t, opts)
}

// consumeWith leases with opts and checks the answer: every record as
// produced, not acked, not under another unexpired lease, under a lease id
// never given before for its partition.
func (r *runner) consumeWith(t *topicModel, opts runtime.ConsumeOptions) []runtime.LeasedRecord {
	var got []runtime.LeasedRecord
	err := retryBusy(func() (err error) { got, err = r.n.Consume(r.ctx, t.name, opts); return err })
	return r.checkLeased(t, opts, got, err)
}

// checkLeased checks a consume's answer as consumeWith says and takes its
// leases into the model.
func (r *runner) checkLeased(t *topicModel, opts runtime.ConsumeOptions, got []runtime.LeasedRecord, err error) []runtime.LeasedRecord {
	r.logf("consume %s partition %d max %d lease %v: %s (%v)", t.name, opts.Partition, opts.MaxRecords, opts.Lease, leasedString(got), err)
	r.must("consume", err)
	r.leased(t, opts, got)
	return got
}

// leased checks a consume's answer and records its leases in the model.
func (r *runner) leased(t *topicModel, opts runtime.ConsumeOptions, got []runtime.LeasedRecord) {
	now := time.Now()
	ids := map[int]uint64{}
	for _, rec := range got {
		if rec.Partition < 0 || rec.Partition >= len(t.parts) || (opts.Partition >= 0 && rec.Partition != opts.Partition) {
			r.failf("consume %s: record of partition %d", t.name, rec.Partition)
		}
		p := t.parts[rec.Partition]
		r.checkRecord(t, rec.Partition, rec.Offset, rec.ReadRecord)
		if p.isAcked(rec.Offset) {
			r.failf("consume %s/%d: offset %d leased again after its ack", t.name, rec.Partition, rec.Offset)
		}
		if l, ok := p.leasedNow(rec.Offset, now); ok {
			r.failf("consume %s/%d: offset %d leased under id %d while lease %d holds it until %v",
				t.name, rec.Partition, rec.Offset, rec.LeaseID, l.id, l.deadline)
		}
		if id, seen := ids[rec.Partition]; !seen {
			if p.ids[rec.LeaseID] {
				r.failf("consume %s/%d: lease id %d given again", t.name, rec.Partition, rec.LeaseID)
			}
			ids[rec.Partition] = rec.LeaseID
			p.ids[rec.LeaseID] = true
			p.lastLeases = append(p.lastLeases, rec.LeaseID)
		} else if id != rec.LeaseID {
			r.failf("consume %s/%d: two lease ids %d and %d in one consume", t.name, rec.Partition, id, rec.LeaseID)
		}
		if !rec.LeaseDeadline.Equal(now.Add(opts.Lease)) {
			r.failf("consume %s/%d: deadline %v, want %v", t.name, rec.Partition, rec.LeaseDeadline, now.Add(opts.Lease))
		}
		p.leases[rec.Offset] = leaseModel{id: rec.LeaseID, deadline: rec.LeaseDeadline}
	}
}

// ack acks offsets of one partition: every leased one but the lowest, or
// every one below the high watermark but the frontier (so the acked-ahead
// set grows), some leased ones, or any below the high watermark (acked or
// not, leased or not).
func (r *runner) ack() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	if p.committed == 0 {
		return
	}
	leased := sortedKeys(p.leases)
	var offsets []int64
	low := int64(0)
	for p.isAcked(low) {
		low++
	}
	switch mode := r.rng.IntN(4); {
	case mode == 3 && low+1 < p.committed:
		for o := low + 1; o < p.committed; o++ { // everything but the frontier
			offsets = append(offsets, o)
		}
	case mode == 0 && len(leased) > 1:
		offsets = leased[1:]
	case mode <= 1 && len(leased) > 0:
		for _, o := range leased {
			if r.rng.IntN(2) == 0 {
				offsets = append(offsets, o)
			}
		}
	default:
		for range 1 + r.rng.IntN(10) {
			offsets = append(offsets, r.rng.Int64N(p.committed))
		}
	}
	if len(offsets) == 0 {
		return
	}
	var frontier int64
	err := retryBusy(func() (err error) { frontier, err = r.n.Ack(r.ctx, t.name, pi, offsets...); return err })
	r.logf("ack %s/%d %s: frontier %d (%v)", t.name, pi, offsetsString(offsets), frontier, err)
	r.must("ack", err)
	p.ackedNow(offsets)
	r.checkFrontier(t, pi, frontier, "ack")
}

// checkFrontier checks a frontier the node answered: never past an offset
// whose ack did not return (unless retention deleted it), never below the
// lowest offset not acked.
func (r *runner) checkFrontier(t *topicModel, pi int, frontier int64, what string) {
	p := t.parts[pi]
	low := int64(0)
	for p.isAcked(low) {
		low++
	}
	if frontier < low {
		r.failf("%s %s/%d: frontier %d below %d, every offset under which is acked", what, t.name, pi, frontier, low)
	}
	for o := low; o < frontier; o++ {
		if !p.isAcked(o) && o >= p.start {
			r.failf("%s %s/%d: frontier %d passes offset %d, never acked (log start %d)", what, t.name, pi, frontier, o, p.start)
		}
	}
}

// nack gives back offsets under a lease id the partition gave (a live
// one, or an old one, even from before a restart).
func (r *runner) nack() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	if len(p.lastLeases) == 0 {
		return
	}
	id := p.lastLeases[len(p.lastLeases)-1-r.rng.IntN(min(len(p.lastLeases), 4))]
	var offsets []int64
	for _, o := range sortedKeys(p.leases) {
		if p.leases[o].id == id && r.rng.IntN(3) > 0 {
			offsets = append(offsets, o)
		}
	}
	if p.committed > 0 && r.rng.IntN(2) == 0 {
		if o := r.rng.Int64N(p.committed); !slices.Contains(offsets, o) {
			offsets = append(offsets, o)
		}
	}
	if len(offsets) == 0 {
		return
	}
	now := time.Now()
	want, maybe := 0, 0 // maybe: leases of records retention deleted, which a consume may have dropped
	for _, o := range offsets {
		if l, ok := p.leasedNow(o, now); ok && l.id == id {
			if o < p.start {
				maybe++
			} else {
				want++
			}
		}
	}
	var given int
	err := retryBusy(func() (err error) { given, err = r.n.Nack(r.ctx, t.name, pi, id, offsets...); return err })
	r.logf("nack %s/%d lease %d %s: %d given back (%v)", t.name, pi, id, offsetsString(offsets), given, err)
	r.must("nack", err)
	if given < want || given > want+maybe {
		r.failf("nack %s/%d lease %d: gave back %d, want %d (+%d of deleted records)", t.name, pi, id, given, want, maybe)
	}
	for _, o := range offsets {
		if l, ok := p.leasedNow(o, now); ok && l.id == id {
			delete(p.leases, o)
		}
	}
}

// pause advances the clock: leases run out, write-outs, evictions, sweeps.
func (r *runner) pause() {
	d := r.odd(time.Duration(50+r.rng.IntN(6000)) * time.Millisecond)
	if r.rng.IntN(5) == 0 {
		d = r.odd(time.Duration(5+r.rng.IntN(20)) * time.Second)
	}
	r.logf("sleep %v", d)
	r.sleep(d)
	r.forgetExpired()
}

// forgetExpired drops the model's leases past their deadline.
func (r *runner) forgetExpired() {
	now := time.Now()
	for _, t := range r.topics {
		for _, p := range t.parts {
			for o, l := range p.leases {
				if !now.Before(l.deadline) {
					delete(p.leases, o)
				}
			}
		}
	}
}

// changeRetention sets a topic's bounds by time, by bytes, both or none.
func (r *runner) changeRetention() {
	t := r.pick()
	var ret runtime.Retention
	if r.rng.IntN(2) == 0 {
		ret.Ms = int64(500 + r.rng.IntN(10000))
	}
	if r.rng.IntN(2) == 0 {
		ret.Bytes = int64(512 + r.rng.IntN(12<<10))
	}
	open, moved := r.openParts(t), ret.Ms != t.retMs || ret.Bytes != t.retBytes
	r.setRetention(t, ret)
	r.retentionAtOnce(t, open, moved) // check_retention.go
}

// setRetention sets a topic's bounds and takes them into the model.
func (r *runner) setRetention(t *topicModel, ret runtime.Retention) {
	var rec runtime.TopicRecord
	err := retryBusy(func() (err error) {
		rec, err = r.n.UpdateRetention(r.ctx, t.name, func(runtime.Retention) (runtime.Retention, error) { return ret, nil })
		return err
	})
	r.logf("retention %s: %d ms, %d B (%v)", t.name, ret.Ms, ret.Bytes, err)
	r.must("retention", err)
	if rec.RetentionMs != ret.Ms || rec.RetentionBytes != ret.Bytes {
		r.failf("retention %s: record says %d ms %d B", t.name, rec.RetentionMs, rec.RetentionBytes)
	}
	t.retMs, t.retBytes, t.retSince = ret.Ms, ret.Bytes, time.Now()
	if ret.Ms != 0 || ret.Bytes != 0 {
		for _, p := range t.parts {
			p.unbounded = false
		}
	}
}

// drain advances the clock past every lease deadline, then consumes
// everything: every record below the high watermark not acked (and not
// deleted by retention) must be leased, once.
func (r *runner) drain() {
	var last time.Time
	for _, t := range r.topics {
		for _, p := range t.parts {
			for _, l := range p.leases {
				if l.deadline.After(last) {
					last = l.deadline
				}
			}
		}
	}
	if d := time.Until(last); d >= 0 {
		r.logf("drain: sleep %v past every lease", r.odd(d))
		r.sleep(r.odd(d))
	}
	r.forgetExpired()
	t := r.pick()
	r.logf("drain %s", t.name)
	got := map[int]map[int64]bool{}
	for range 100 {
		recs := r.consumeWith(t, runtime.ConsumeOptions{Partition: runtime.AnyPartition, MaxRecords: 500, MaxBytes: 1 << 30, Lease: time.Hour})
		if len(recs) == 0 {
			break
		}
		for _, rec := range recs {
			if got[rec.Partition] == nil {
				got[rec.Partition] = map[int64]bool{}
			}
			got[rec.Partition][rec.Offset] = true
		}
	}
	infos := r.describe(t)
	for pi, p := range t.parts {
		for o := infos[pi].StartOffset; o < p.committed; o++ {
			if !p.isAcked(o) && !got[pi][o] {
				r.failf("drain %s/%d: offset %d neither acked nor leased again once every lease ran out (log start %d)", t.name, pi, o, infos[pi].StartOffset)
			}
		}
	}
}

// restart closes the node cleanly and starts a new one on the same disk.
func (r *runner) restart() {
	r.logf("restart")
	r.settle()
	r.must("close", r.closeNode(nil))
	r.n = nil
	r.start()
	r.checkAll(true)
}

// crash takes a crash image of the disk under a plan drawn from the run,
// closes the old node (its later writes go to the old disk) and starts a
// new node on the image.
func (r *runner) crash() {
	plan := sim.CrashPlan{Data: sim.DataLoss(r.rng.IntN(3)), Seed: r.rng.Uint64(), Garbage: r.rng.IntN(2) == 0,
		KeepNameOps: r.rng.IntN(6) - 1}
	r.logf("crash: %+v", plan)
	at := time.Now()
	ahead := map[*partModel]int{}
	for _, t := range r.topics {
		for _, p := range t.parts {
			low := int64(0)
			for p.isAcked(low) {
				low++
			}
			ahead[p] = len(p.acked) - int(low)
		}
	}
	r.crashNode(plan)
	r.afterCrash(at, ahead)
	r.cursorsAfterCrash(at)
	r.checkAll(true)
}

// crashNode takes a crash image of the disk under plan, closes the old
// node (its later writes go to the old disk, which no one reads) and
// starts a new node on the image.
func (r *runner) crashNode(plan sim.CrashPlan) {
	r.settle()
	img := r.d.Crash(plan)
	r.trace.disk(img)
	r.trace.attach(img)
	r.d.SetHook(nil)
	r.n.Close()
	r.n, r.d = nil, img
	r.res.Crashes++
	r.start()
}

// sortedKeys lists a lease map's offsets in order.
func sortedKeys(m map[int64]leaseModel) []int64 {
	out := make([]int64, 0, len(m))
	for o := range m {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}
