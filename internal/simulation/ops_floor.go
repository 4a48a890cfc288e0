package simulation

import (
	"errors"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// The node's floor of free space in every run (runtime.Config's
// MinFreeBytes and MinFreeInodes). The simulated disk reports a vast free
// space but in diskFloor, which brings it down to the floor.
const (
	floorBytes  = 64 << 10
	floorInodes = 16
	// guardEvery is how old the node's reading of the free space may be
	// (runtime's diskGuardEvery): a change of the disk's capacity is seen
	// by a produce this long after it.
	guardEvery = 100 * time.Millisecond
)

// diskFloor shrinks the simulated disk to leave a little more than the
// floor free (up to 6 KB of bytes, or up to four inodes), produces to one
// partition until a produce is refused, then sets a small byte bound of
// retention on the topic and, once the reaper ran, produces the refused
// batch again. Checked (docs/design.md, "A floor of free space";
// docs/http-api.md, "Produce": 507 no_space): a produce is refused only
// with ErrLowDisk (a partition.ErrNoSpace), only when its frame (and a
// roll's files) would take the free space under the floor, and keeps
// nothing; one taken leaves the free space at or above the floor; the
// refused batch is taken again, at the same offsets, once retention freed
// enough space for it. The disk is given its room back at the end.
func (r *runner) diskFloor() {
	r.atRest()
	if r.anyPoisoned() {
		return // a poisoned log refuses the produces this operation counts on (check_fault.go)
	}
	t := r.pick()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	byInodes := r.rng.IntN(3) == 0
	const huge = 1 << 50
	r.d.SetCapacity(vfs.Space{Bytes: huge, Inodes: huge})
	used := r.free()
	capacity := vfs.Space{Bytes: huge - used.Bytes + floorBytes + uint64(r.rng.IntN(6000))}
	if byInodes {
		capacity = vfs.Space{Inodes: huge - used.Inodes + floorInodes + uint64(r.rng.IntN(5))}
	}
	r.d.SetCapacity(capacity)
	defer func() {
		r.d.SetCapacity(vfs.Space{})
		r.logf("disk floor: the disk's room given back")
		r.sleep(r.odd(guardEvery)) // so no later produce meets the guard's reading of the small disk
		r.forgetExpired()
	}()
	r.logf("disk floor %s/%d: capacity %+v (free %+v), floor %d B, %d inodes", t.name, pi, capacity, r.free(), floorBytes, floorInodes)
	r.sleep(r.odd(guardEvery))
	r.forgetExpired()
	var refused []partition.Record
	for range 40 {
		recs := make([]partition.Record, 1+r.rng.IntN(50))
		for i := range recs {
			recs[i] = partition.Record{Value: value(t.name, t.gen, pi, p.committed+int64(i))}
		}
		if !r.produceUnderFloor(t, pi, recs) {
			refused = recs
			break
		}
	}
	if refused == nil {
		return
	}
	r.res.Live.FloorRefusals++
	r.setRetention(t, runtime.Retention{Ms: t.retMs, Bytes: int64(512 + r.rng.IntN(1536))})
	d := r.odd(retentionWithin)
	r.logf("sleep %v, for the reaper to free space", d)
	r.sleep(d)
	r.forgetExpired()
	if r.produceUnderFloor(t, pi, refused) {
		r.res.Live.FloorRetaken++
	}
}

// produceUnderFloor produces recs to one partition of a disk near the
// floor and checks the answer; it reports whether the batch was taken.
func (r *runner) produceUnderFloor(t *topicModel, pi int, recs []partition.Record) bool {
	p := t.parts[pi]
	// Opened first: an open's files are not the commit's.
	r.must("open", retryBusy(func() error { _, err := r.n.Log(r.ctx, t.name, pi); return err }))
	before := r.free()
	// At most two rolls: one before the frame (a full segment, or one past
	// its roll age), one after it (the frame fills the segment); each
	// makes a time index of at most a frame per 27 bytes of segment and a
	// segment file.
	cost := frameBytes(recs) + 2*int64(wire.TimeIndexFileSize(int(r.segBytes/wire.FrameHeaderSize)+2))
	fits := before.Bytes >= floorBytes+uint64(cost) && before.Inodes >= floorInodes+4
	var base int64
	err := retryBusy(func() (err error) { base, err = r.n.Produce(r.ctx, t.name, pi, recs); return err })
	r.logf("produce %s/%d %d records near the floor (free %d B, %d inodes; frame and roll %d B): base %d (%v)",
		t.name, pi, len(recs), before.Bytes, before.Inodes, cost, base, err)
	if err != nil {
		switch {
		case !errors.Is(err, runtime.ErrLowDisk) || !errors.Is(err, partition.ErrNoSpace):
			r.failf("produce %s/%d near the floor: %v, want the floor's refusal (ErrLowDisk, a partition.ErrNoSpace)", t.name, pi, err)
		case fits:
			r.failf("produce %s/%d refused by the floor with %d B and %d inodes free, %d B asked above a floor of %d B, %d inodes",
				t.name, pi, before.Bytes, before.Inodes, cost, floorBytes, floorInodes)
		}
		if info := r.describe(t)[pi]; info.Known && info.HighWatermark != p.committed {
			r.failf("produce %s/%d refused by the floor, but the high watermark moved from %d to %d", t.name, pi, p.committed, info.HighWatermark)
		}
		return false
	}
	if base != p.committed {
		r.failf("produce %s/%d landed at %d, want %d (offsets dense)", t.name, pi, base, p.committed)
	}
	r.landed(p, base, len(recs))
	after := r.free()
	if after.Bytes < floorBytes || after.Inodes < floorInodes {
		r.failf("produce %s/%d near the floor took the free space to %d B, %d inodes, under the floor of %d B, %d inodes (%d B, %d inodes before)",
			t.name, pi, after.Bytes, after.Inodes, floorBytes, floorInodes, before.Bytes, before.Inodes)
	}
	return true
}

// frameBytes is the size of the frame a batch of recs (no keys) makes
// alone: its header, and each record's length and envelope.
func frameBytes(recs []partition.Record) int64 {
	n := int64(wire.FrameHeaderSize)
	for _, rec := range recs {
		n += int64(wire.RecordLenSize + wire.EnvelopeSize(len(rec.Key), len(rec.Value)))
	}
	return n
}

// free is the simulated disk's free space, once everything settled.
func (r *runner) free() vfs.Space {
	synctest.Wait()
	s, err := r.d.Free(dataDir)
	r.must("free space", err)
	return s
}
