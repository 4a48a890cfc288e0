package simulation

import (
	"time"

	"github.com/narad-io/storage/runtime"
)

// bigAck grows a partition's acked-ahead set past what a consumer.ahead
// slot holds (4,052 offsets at most): it produces, in batches of up to
// 1,000 records, until 4,100 to 6,000 records stand above the frontier,
// leases them half the time, acks every one of them but the frontier in
// one call, then closes the log cleanly (the open-log budget, idle
// eviction or a restart: a long run has one partition, so not the
// budget; a cluster run not the budget either, whose close this does
// not aim at the member's logs). A move after it carries the
// consumer.acked the close wrote (cluster.go draws it). A clean close keeps every ack (docs/design.md,
// "Consumer progress": consumer.acked holds a set over a slot), so the
// progress is checked exactly after it, and a consume after an eviction
// leases none of the acked records again.
func (r *runner) bigAck() {
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	if r.poisonedNow(t, pi) {
		return
	}
	low := int64(0)
	for p.isAcked(low) {
		low++
	}
	need := low + 1 + int64(4100+r.rng.IntN(1900))
	for p.committed < need {
		count := int(min(1000, need-p.committed))
		r.must("produce", retryBusy(func() error { return r.produceOnce(t, pi, count) }))
	}
	if r.rng.IntN(2) == 0 {
		r.consumeWith(t, runtime.ConsumeOptions{Partition: pi, MaxRecords: runtime.MaxLeasedPerPartition, MaxBytes: 1 << 30,
			Lease: r.odd(time.Duration(10+r.rng.IntN(50)) * time.Second)})
	}
	var offsets []int64
	for o := low + 1; o < p.committed; o++ {
		if !p.isAcked(o) {
			offsets = append(offsets, o)
		}
	}
	r.must("ack", retryBusy(func() error { return r.ackOnce(t, pi, offsets) }))
	way := r.drawClose()
	if r.cl != nil { // the budget's close picks among every member's logs: not in a cluster run
		way = []closeWay{byIdle, byRestart}[r.rng.IntN(2)]
	}
	if way == byRestart && r.cl != nil {
		r.onMember(r.cl.cur, func() {
			r.closeLog(t, pi, way, nil, nil)
			r.checkAll(true)
		})
		return
	}
	r.closeLog(t, pi, way, nil, nil)
	if way == byRestart {
		r.checkAll(true)
		return
	}
	r.on(t) // the pause's checks went to every topic's owner
	r.checkConsumer(t, pi)
	r.consumeWith(t, runtime.ConsumeOptions{Partition: pi, MaxRecords: 100, Lease: r.odd(time.Duration(1+r.rng.IntN(20)) * time.Second)})
}

// bigAckWeight is bigAck's weight in step: only the long runs (one in 12)
// draw it, where a partition holds thousands of records anyway; drawn in
// every run, it cost more than all the other operations together.
func (r *runner) bigAckWeight() int {
	if r.big {
		return 1
	}
	return 0
}
