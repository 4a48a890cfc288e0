package simulation

import (
	"path"
	"slices"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/wire"
)

// concurrentProduce runs two to five producers at once on one partition,
// each a batch of 1 to 50 records (one in eight up to 1,000). The first
// producer's commit is held at its first file call (a gate, gate.go) while
// the others queue behind it, one at a time, so they land in one group
// commit in the order they queued: the interleaving is the run's, drawn
// from its seed, never the scheduler's. Their records' bytes name their batch, not
// their offset, which the model learns from the answers: every batch
// lands dense, the batches tile the partition from the high watermark
// up, and nothing is answered, nor the high watermark moved, while the
// first commit is held. One time in three a fetch long-polls at the high
// watermark meanwhile: it must wait until the commit, then serve the
// first batch's records (at most as many as it holds, so the answer is
// the same whether the poll reads before the group's commit or after).
func (r *runner) concurrentProduce() {
	r.atRest()
	if r.anyPoisoned() {
		return // a poisoned log refuses the produces this operation counts on (check_fault.go)
	}
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	// Opened first, so the first producer's first file call is its commit's.
	r.must("open", retryBusy(func() error { _, err := r.n.Log(r.ctx, t.name, pi); return err }))
	type batch struct {
		id   int
		recs []partition.Record
		base int64
		err  error
		done chan struct{}
	}
	batches := make([]*batch, 2+r.rng.IntN(4))
	sizes := make([]int, len(batches))
	for i := range batches {
		size := 1 + r.rng.IntN(50)
		if r.rng.IntN(8) == 0 {
			size = 1 + r.rng.IntN(1000)
		}
		b := &batch{id: r.live.batches, recs: make([]partition.Record, size), done: make(chan struct{})}
		r.live.batches++
		for j := range b.recs {
			b.recs[j] = partition.Record{Value: batchValue(t.name, t.gen, pi, b.id, j)}
		}
		batches[i], sizes[i] = b, size
	}
	from := p.committed
	g := r.openGate()
	defer g.close() // a violation must not leave producers held
	var poll *pendingCall
	if r.rng.IntN(3) == 0 {
		poll = r.serveAsync("GET", fetchTarget(t, pi, from, 1+r.rng.IntN(sizes[0]), 5000))
	}
	for _, b := range batches {
		goSettled(func() {
			defer close(b.done)
			b.base, b.err = r.n.Produce(r.ctx, t.name, pi, b.recs)
		})
	}
	grouped := g.holds(dataDir) // the commit's first call: the floor's reading of the free space, or its first write
	r.logf("concurrent produce %s/%d: batches of %v records (ids %d..), the first commit held: %v", t.name, pi, sizes, batches[0].id, grouped)
	if grouped {
		for i, b := range batches {
			if answered(b.done) {
				r.failf("concurrent produce %s/%d: batch %d answered (base %d, %v) while the first commit is held", t.name, pi, i, b.base, b.err)
			}
		}
		if l, ok := r.n.LogIfOpen(t.name, pi); !ok || l.HighWatermark() != from {
			r.failf("concurrent produce %s/%d: the log (open: %v) moved its high watermark while the first commit is held, from %d", t.name, pi, ok, from)
		}
		if poll != nil && answered(poll.done) {
			r.failf("concurrent produce %s/%d: a long poll answered while the commit is held: %d %s", t.name, pi, poll.rec.Code, poll.rec.Body)
		}
		r.res.Live.GroupedBatches += len(batches) - 1
	}
	g.pass() // the commit goes on, its calls one at a time (a woken poll reads between two)
	g.close()
	order := make([]*batch, len(batches))
	copy(order, batches)
	slices.SortFunc(order, func(a, b *batch) int { return int(a.base - b.base) })
	var bases []int64
	for _, b := range order {
		if !answered(b.done) {
			r.failf("concurrent produce %s/%d: batch %d not answered once the commit went on", t.name, pi, b.id)
		}
		r.must("concurrent produce", b.err)
		bases = append(bases, b.base)
	}
	r.logf("concurrent produce %s/%d: landed at %v", t.name, pi, bases)
	for _, b := range order {
		if b.base != p.committed {
			r.failf("concurrent produce %s/%d: batch %d of %d records landed at %d, want %d (the batches tile the partition from %d)",
				t.name, pi, b.id, len(b.recs), b.base, p.committed, from)
		}
		p.batches = append(p.batches, batchSpan{base: b.base, count: int64(len(b.recs)), id: b.id})
		r.landed(p, b.base, len(b.recs))
	}
	r.res.Live.ConcBatches += len(batches)
	if poll != nil {
		r.checkPoll(t, pi, poll, from, from+int64(sizes[0]), nil, false, true)
	}
}

// produceTo commits count records to one partition, as produce does.
func (r *runner) produceTo(t *topicModel, pi, count int) { r.produceThrough(retryBusy, t, pi, count) }

// produceThrough is produceTo with the call made through call: retryBusy,
// or a gate's retry while callers are parked (gate.go).
func (r *runner) produceThrough(call func(func() error) error, t *topicModel, pi, count int) {
	p := t.parts[pi]
	recs := make([]partition.Record, count)
	for i := range recs {
		recs[i] = partition.Record{Value: value(t.name, t.gen, pi, p.committed+int64(i))}
	}
	var base int64
	err := call(func() (err error) { base, err = r.n.Produce(r.ctx, t.name, pi, recs); return err })
	r.logf("produce %s/%d %d records: base %d (%v)", t.name, pi, count, base, err)
	r.must("produce", err)
	if base != p.committed {
		r.failf("produce %s/%d landed at %d, want %d (offsets dense)", t.name, pi, base, p.committed)
	}
	r.landed(p, base, count)
}

// landed takes a produce that returned, count records at base, into the
// model.
func (r *runner) landed(p *partModel, base int64, count int) {
	p.committed = base + int64(count)
	now := time.Now()
	for range count {
		p.commitAt = append(p.commitAt, now)
	}
}

// answered reports whether done is closed.
func answered(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// partDir is the directory of partition pi of t.
func partDir(t *topicModel, pi int) string {
	pdir, _ := wire.PartitionDirName(pi)
	return path.Join(dataDir, wire.TopicsDirName, t.name, pdir)
}
