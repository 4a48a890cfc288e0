package simulation

import (
	"errors"
	"slices"
	"time"

	"github.com/narad-io/storage/runtime"
)

// extend moves the deadline of records leased under a lease id the
// partition gave (a live one, or an old one) with runtime.Node.ExtendLease,
// and checks the lease rules of docs/design.md, "Queue consume": only
// records leased now under that id are extended (one acked, nacked, given
// back, expired, or leased again under another id is passed over), each
// counted once, to exactly now plus the lease; a lease out of range
// (under a millisecond or over runtime.MaxLease) is ErrBadLease and
// changes nothing. The model then holds the new deadlines: a consume
// before them must not lease the records again, and once they pass it
// must.
func (r *runner) extend() {
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
	if len(offsets) > 0 && r.rng.IntN(4) == 0 {
		offsets = append(offsets, offsets[0]) // a record twice: counted once
	}
	if p.committed > 0 && r.rng.IntN(2) == 0 {
		offsets = append(offsets, r.rng.Int64N(p.committed)) // any: acked, another lease's, free, or this one's
	}
	if len(offsets) == 0 {
		return
	}
	lease := r.odd(time.Duration(1+r.rng.IntN(20)) * time.Second)
	bad := false
	switch r.rng.IntN(10) {
	case 0:
		lease, bad = time.Duration(r.rng.IntN(1000))*time.Microsecond, true
	case 1:
		lease, bad = runtime.MaxLease+r.odd(time.Millisecond), true
	}
	now := time.Now()
	want, maybe := 0, 0 // maybe: leases of records retention deleted, which a consume may have dropped
	var seen []int64
	for _, o := range offsets {
		if slices.Contains(seen, o) {
			continue
		}
		seen = append(seen, o)
		if l, ok := p.leasedNow(o, now); ok && l.id == id {
			if o < p.start {
				maybe++
			} else {
				want++
			}
		}
	}
	var extended int
	err := retryBusy(func() (err error) {
		extended, err = r.n.ExtendLease(r.ctx, t.name, pi, id, lease, offsets...)
		return err
	})
	r.logf("extend %s/%d lease %d by %v %s: %d extended (%v)", t.name, pi, id, lease, offsetsString(offsets), extended, err)
	r.res.Live.Extends++
	if bad {
		if !errors.Is(err, runtime.ErrBadLease) || extended != 0 {
			r.failf("extend %s/%d by %v: %d extended (%v), want ErrBadLease", t.name, pi, lease, extended, err)
		}
		return
	}
	r.must("extend", err)
	if extended < want || extended > want+maybe {
		r.failf("extend %s/%d lease %d: extended %d, want %d (+%d of deleted records)", t.name, pi, id, extended, want, maybe)
	}
	for _, o := range seen {
		if l, ok := p.leasedNow(o, now); ok && l.id == id {
			deadline := now.Add(lease)
			if o < p.start && deadline.Before(l.deadline) {
				deadline = l.deadline // extended or not: the later deadline bounds both
			}
			p.leases[o] = leaseModel{id: id, deadline: deadline}
		}
	}
}
