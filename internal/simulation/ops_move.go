package simulation

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"path"
	"slices"
	"syscall"

	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// The moves of a cluster run (cluster.go), each made whole within one
// operation, and checked after it against the model
// (docs/scaling.md, "moves" and "lost nodes"):
//
//   - a move carries every acked record, the high watermark (the boundary
//     the freeze wrote is the model's, and the new owner's is no lower),
//     every ack (the freeze's close wrote the consumer's files out) and
//     every cursor's position (written out for the listing) to the new
//     owner; the leases stay behind, so the model forgets them and the new
//     owner must deliver those records again; lease ids never repeat
//     (consumer.lease moves too); the old owner keeps no copy;
//   - a drain moves every partition of a member;
//   - a member marked lost: its partitions go to the others empty, served
//     from offset 0 (the records it held are those the contract lets go:
//     the model starts the partition afresh, its records' bytes made
//     different from the lost ones', its cursors gone); it comes back
//     (sets its copies aside before it serves, as cluster.Participant's
//     Join does) or a fresh member takes its place.

// move moves one topic's partition to another live member.
func (r *runner) move() {
	if len(r.cl.members) < 2 {
		return
	}
	t := r.pick()
	src := r.cl.cur
	r.moveTo(t, src, r.other(src))
}

// other draws a live member other than m.
func (r *runner) other(m *member) *member {
	others := slices.DeleteFunc(slices.Clone(r.cl.members), func(x *member) bool { return x == m })
	return others[r.rng.IntN(len(others))]
}

// moveTo moves t's partition from src to dst as package cluster's pull
// does: the sealed segments copied while src serves on (a produce may
// land meanwhile), the partition frozen (no owner; src closes its log),
// the rest copied (the active segment, the boundary, the consumer's
// files, the cursors' positions), installed on dst, dst made the owner,
// src's copy dropped. One move in four meets a fault on dst's install
// (moveFault): the move fails, and is cancelled as the pull cancels it;
// one in eight a crash of dst during it (ops_movecrash.go).
func (r *runner) moveTo(t *topicModel, src, dst *member) bool {
	r.logf("move %s/0 from %s to %s", t.name, src.id, dst.id)
	var in *injected
	var ic *installCrash
	switch r.rng.IntN(8) {
	case 0, 1:
		in = r.moveFault(t, dst)
	case 2:
		ic = r.armInstallCrash(t, dst)
	}
	r.settle()
	final, frozen, err := r.transfer(t, src, dst, true)
	if ic != nil {
		return r.finishInstallCrash(t, src, dst, ic, err == nil)
	}
	if in != nil {
		fired := r.lift(in, "move")
		if (fired > 0) != (err != nil) {
			r.failf("move %s/0: the fault fired %d times, the move answered %v", t.name, fired, err)
		}
	}
	if err != nil && in == nil {
		r.failf("move %s/0: failed with no fault: %v", t.name, err)
	}
	if err != nil {
		r.cancelMove(t, src, dst, frozen, err)
		return false
	}
	r.cl.meta.setOwner(t.name, 0, dst.id)
	r.must("drop the old owner's copy", src.n.DropPartition(r.ctx, t.name, 0))
	r.noCopy(src, t)
	r.logf("moved %s/0 to %s: %d segments, high watermark %d, %d cursors, consumer files %d",
		t.name, dst.id, len(final.Segments), final.HighWatermark, len(final.Cursors), len(final.Consumer))
	t.parts[0].leases = map[int64]leaseModel{} // leases do not move: their records are delivered again
	r.res.Live.Moves++
	r.checkTopic(t)
	return true
}

// transfer copies t's partition from src into a receive on dst and
// commits it; the first error stops it (the receive aborted), frozen
// saying whether src had frozen the partition by then. serving: src
// serves the partition until the freeze (a produce may land meanwhile);
// not so in a pull made again after a crash, which finds it frozen.
func (r *runner) transfer(t *topicModel, src, dst *member, serving bool) (final runtime.TransferListing, frozen bool, err error) {
	first, err := src.n.TransferListing(r.ctx, t.name, 0)
	r.must("transfer listing", err)
	rcv, err := dst.n.ReceivePartition(r.ctx, t.name, 0, first.Incarnation)
	if err != nil {
		return final, false, err
	}
	committed := false
	defer func() {
		if !committed {
			r.must("abort the receive", rcv.Abort())
		}
	}()
	if rcv.AssignedAtStart() {
		r.failf("move %s/0: the receive found %s assigned the partition already", t.name, dst.id)
	}
	written := map[string]int64{}
	for i, s := range first.Segments {
		if i < len(first.Segments)-1 {
			if err := r.copyFile(src, t, s.Name, s.Size, rcv); err != nil {
				return final, false, err
			}
			written[s.Name] = s.Size
		}
	}
	if serving && r.rng.IntN(2) == 0 {
		r.use(src) // the old owner serves on until the freeze
		r.produceTo(t, 0, 1+r.rng.IntN(50))
	}
	r.cl.meta.setOwner(t.name, 0, "")
	r.must("freeze", src.n.FreezePartition(r.ctx, t.name, 0))
	final, err = src.n.TransferListing(r.ctx, t.name, 0)
	r.must("final transfer listing", err)
	p := t.parts[0]
	if !final.Known || final.HighWatermark != p.committed {
		r.failf("move %s/0: the frozen boundary is %d (known %v), want %d", t.name, final.HighWatermark, final.Known, p.committed)
	}
	keep := map[string]bool{}
	for _, s := range final.Segments {
		keep[s.Name] = true
		if size, ok := written[s.Name]; ok {
			if size != s.Size {
				r.failf("move %s/0: sealed segment %s was %d B, now %d B", t.name, s.Name, size, s.Size)
			}
			continue
		}
		if err := r.copyFile(src, t, s.Name, s.Size, rcv); err != nil {
			return final, true, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(written)) { // in order: exact replay
		if !keep[name] {
			if err := rcv.Remove(name); err != nil {
				return final, true, err
			}
		}
	}
	if err := r.writeFile(rcv, wire.HWMFileName, final.HighWatermark); err != nil {
		return final, true, err
	}
	for _, f := range final.Consumer {
		if err := r.copyFile(src, t, f.Name, f.Size, rcv); err != nil {
			return final, true, err
		}
	}
	for _, c := range final.Cursors {
		if err := r.writeFile(rcv, c.Name, c.Position); err != nil {
			return final, true, err
		}
	}
	committed = true
	return final, true, rcv.Commit(r.ctx)
}

// moveFault arms a fault on dst's install of t's partition: EIO on every
// write or fdatasync of a file of the staging directory, or on the
// install's renames or directory syncs, from the first such call or a
// later one.
func (r *runner) moveFault(t *topicModel, dst *member) *injected {
	staging := partDir(t, 0) + wire.InstallingDirSuffix
	var f sim.Fault
	switch r.rng.IntN(4) {
	case 0:
		f = sim.Fault{Op: sim.OpWrite, Path: path.Join(staging, "*")}
	case 1:
		f = sim.Fault{Op: sim.OpSync, Path: path.Join(staging, "*")}
	case 2:
		f = sim.Fault{Op: sim.OpRename, Path: partDir(t, 0) + ".*"}
	default:
		f = sim.Fault{Op: sim.OpSyncDir, Path: path.Dir(partDir(t, 0))}
	}
	f.Err, f.Nth, f.Sticky = syscall.EIO, 1+r.rng.IntN(3), true
	d := r.d
	r.d = dst.d
	in := r.inject(f)
	r.d = d
	return in
}

// cancelMove ends a move that failed as package cluster's pull does:
// after the freeze the old owner is the owner again and whatever was
// installed on the new one is dropped; before it nothing changed. The
// old owner must then serve the partition as before the move: every
// record, ack and cursor position, its leases too (the freeze closed the
// log; the queue outlives a close).
func (r *runner) cancelMove(t *topicModel, src, dst *member, frozen bool, err error) {
	r.logf("move %s/0 failed (frozen: %v): %v", t.name, frozen, err)
	if frozen {
		r.cl.meta.setOwner(t.name, 0, src.id)
		r.must("drop what the failed move installed", dst.n.DropPartition(r.ctx, t.name, 0))
	}
	r.noCopy(dst, t)
	r.res.Live.MovesFailed++
	r.checkTopic(t)
}

// noCopy checks that m holds no directory of t's partition and does not
// serve it: no partition is served by two members (a read on m, not its
// owner, is ErrNotAssigned).
func (r *runner) noCopy(m *member, t *topicModel) {
	if _, err := m.n.Read(r.ctx, t.name, 0, 0, 1, 1<<10); !errors.Is(err, runtime.ErrNotAssigned) {
		r.failf("move %s/0: %s, not its owner, answered a read: %v", t.name, m.id, err)
	}
	dirs, err := m.n.PartitionDirs(t.name)
	r.must("partition dirs", err)
	if slices.Contains(dirs, 0) {
		r.failf("move %s/0: %s keeps a copy", t.name, m.id)
	}
}

// copyFile copies one file of src's listing into the receive.
func (r *runner) copyFile(src *member, t *topicModel, name string, size int64, rcv *runtime.Receiver) error {
	f, err := src.n.OpenTransferFile(r.ctx, t.name, 0, name)
	r.must("open "+name, err)
	defer f.Close()
	return rcv.WriteFile(name, size, io.NewSectionReader(f, 0, size))
}

// writeFile writes an 8-byte position file (the hwm file, a cursor's)
// into the receive.
func (r *runner) writeFile(rcv *runtime.Receiver, name string, pos int64) error {
	b, err := wire.EncodeOffsetFile(pos)
	r.must("encode "+name, err)
	return rcv.WriteFile(name, int64(len(b)), bytes.NewReader(b[:]))
}

// checkTopic checks every record, the consumer's progress and the
// cursors of t on its owner.
func (r *runner) checkTopic(t *topicModel) {
	all := r.topics
	r.topics = []*topicModel{t}
	defer func() { r.topics = all }()
	r.settle()
	r.checkAll(true)
}

// drainMember moves every partition of one member to the others.
func (r *runner) drainMember() {
	if len(r.cl.members) < 2 {
		return
	}
	m := r.pickMember()
	r.logf("drain member %s", m.id)
	kept := 0 // partitions whose move failed (a fault), cancelled
	for _, t := range r.owned(m) {
		if !r.moveTo(t, m, r.other(m)) {
			kept++
		}
	}
	if got := r.owned(m); len(got) != kept {
		r.failf("drain %s: it still owns %d partitions, %d of them not moved by a failed move", m.id, len(got), kept)
	}
}

// loseMember marks one member lost: its node stops as in a power loss,
// its partitions go to the others empty. Then it comes back, setting
// aside its copies of what it lost, or a fresh member takes its place.
func (r *runner) loseMember() {
	if len(r.cl.members) < 2 {
		return
	}
	m := r.pickMember()
	plan := sim.CrashPlan{Data: sim.DataLoss(r.rng.IntN(3)), Seed: r.rng.Uint64(), Garbage: r.rng.IntN(2) == 0, KeepNameOps: r.rng.IntN(6) - 1}
	r.logf("member %s lost: %+v", m.id, plan)
	r.settle()
	img := m.d.Crash(plan)
	r.trace.disk(img)
	r.trace.attach(img)
	m.d.SetHook(nil)
	m.n.Close()
	m.n, m.d = nil, img
	r.res.Crashes++
	lost := r.owned(m)
	r.cl.members = slices.DeleteFunc(r.cl.members, func(x *member) bool { return x == m })
	for _, t := range lost {
		to := r.pickMember()
		r.cl.meta.setOwner(t.name, 0, to.id)
		r.gens[t.name]++
		t.gen = r.gens[t.name] // records made from now on differ from the lost ones
		t.parts[0] = newPart()
		t.parts[0].unbounded = true
		t.cursors = topicCursors{}
		r.logf("%s/0 given to %s, empty", t.name, to.id)
		r.res.Live.Lost++
	}
	if r.rng.IntN(2) == 0 {
		r.comeBack(m, lost)
	} else if len(r.cl.members) < 3 {
		r.join(r.newMember())
		r.logf("member %s joins", r.cl.cur.id)
	}
	if !slices.Contains(r.cl.members, m) {
		r.cl.gone = append(r.cl.gone, m)
	}
	for _, t := range lost {
		r.checkTopic(t)
	}
}

// comeBack starts a lost member again on its disk and sets aside its
// copies of the partitions given away before it serves (as
// cluster.Participant's Join does), then checks it holds none of them
// and that each set-aside copy holds every file the copy held.
func (r *runner) comeBack(m *member, lost []*topicModel) {
	r.logf("member %s comes back", m.id)
	r.cl.members = append(r.cl.members, m)
	r.use(m)
	r.start()
	for _, t := range lost {
		dirs, err := m.n.PartitionDirs(t.name)
		r.must("partition dirs", err)
		for _, p := range dirs {
			before := r.fileNames(m, partDir(t, p))
			path, err := m.n.SetAsidePartition(r.ctx, t.name, p)
			r.must("set aside", err)
			if after := r.fileNames(m, path); !slices.Equal(before, after) {
				r.failf("member %s back: %s/%d set aside at %q holds %v, the copy held %v", m.id, t.name, p, path, after, before)
			}
			r.logf("%s/%d set aside at %s", t.name, p, path)
			r.res.Live.SetAside++
		}
		if dirs, err = m.n.PartitionDirs(t.name); err != nil || len(dirs) != 0 {
			r.failf("member %s back: %s still holds partitions %v (%v)", m.id, t.name, dirs, err)
		}
	}
}

// fileNames lists the names in m's directory dir, in order.
func (r *runner) fileNames(m *member, dir string) []string {
	es, err := m.d.ReadDir(dir)
	r.must("list "+dir, err)
	names := make([]string, 0, len(es))
	for _, e := range es {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	return names
}
