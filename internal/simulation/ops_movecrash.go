package simulation

import (
	"path"
	"slices"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// installCrash is a crash of a move's new owner during its install: an
// image of its disk taken before one of its mutating calls (the n-th from
// the receive on), or after the whole install if it makes fewer, while
// the move goes on to its end on the old disk, which no one reads again.
//
// Invariants: img is nil until the n-th call; renamed and synced say
// whether the staging directory's rename to complete, and the topic
// directory's sync after it, came before the image.
type installCrash struct {
	n, seen         int
	img             *sim.Disk
	plan            sim.CrashPlan
	at              time.Time
	renamed, synced bool
}

// armInstallCrash makes dst's disk take the image at its n-th mutating
// call from now on.
func (r *runner) armInstallCrash(t *topicModel, dst *member) *installCrash {
	ic := &installCrash{n: 1 + r.rng.IntN(40), plan: sim.CrashPlan{Data: sim.DataLoss(r.rng.IntN(3)), Seed: r.rng.Uint64(),
		Garbage: r.rng.IntN(2) == 0, KeepNameOps: r.rng.IntN(6) - 1}}
	r.logf("crash of %s at its install's mutating call %d: %+v", dst.id, ic.n, ic.plan)
	installing, topicDir := partDir(t, 0)+wire.InstallingDirSuffix, path.Dir(partDir(t, 0))
	d := dst.d
	prev := d.Hook()
	d.SetHook(func(c sim.Call) error {
		if prev != nil {
			if err := prev(c); err != nil {
				return err
			}
		}
		switch c.Op {
		case sim.OpWrite, sim.OpSync, sim.OpTruncate, sim.OpMkdir, sim.OpRemove, sim.OpRename, sim.OpSyncDir:
		case sim.OpOpen:
			if c.Flag&0x40 == 0 { // O_CREATE
				return nil
			}
		default:
			return nil
		}
		if ic.img != nil {
			return nil
		}
		if ic.seen++; ic.seen == ic.n {
			ic.take(d)
			return nil
		}
		if c.Op == sim.OpRename && c.Path == installing {
			ic.renamed = true
		}
		if c.Op == sim.OpSyncDir && c.Path == topicDir && ic.renamed {
			ic.synced = true
		}
		return nil
	})
	return ic
}

// take takes the image, once.
func (ic *installCrash) take(d *sim.Disk) {
	if ic.img == nil {
		ic.img, ic.at = d.Crash(ic.plan), time.Now()
	}
}

// finishInstallCrash restarts dst on the image (the install done on the
// old disk is lost with it) and settles the move as its crash left it:
// an install whose staging directory was not yet complete is gone, and
// the move is cancelled (the old owner owns the partition again); one
// whose completion was synced is there whole, and the move completes
// (dst the owner, the old owner's copy dropped); between the two, either.
// Every other partition dst owns is checked as after any crash.
func (r *runner) finishInstallCrash(t *topicModel, src, dst *member, ic *installCrash, moved bool) bool {
	ic.take(dst.d) // fewer calls than n: after the whole install
	r.logf("crash of %s after %d of its install's mutating calls (renamed %v, synced %v)", dst.id, min(ic.seen, ic.n), ic.renamed, ic.synced)
	r.onMember(dst, func() {
		ahead := r.aheadNow()
		dst.d.SetHook(nil)
		r.trace.disk(ic.img)
		r.trace.attach(ic.img)
		r.n.Close()
		r.n, r.d = nil, ic.img
		r.res.Crashes++
		r.start()
		r.afterCrash(ic.at, ahead)
		r.cursorsAfterCrash(ic.at)
		r.checkAll(true)
	})
	dirs, err := dst.n.PartitionDirs(t.name)
	r.must("partition dirs", err)
	installed := slices.Contains(dirs, 0)
	switch {
	case installed && !ic.renamed:
		r.failf("move %s/0: the install is on %s after a crash before its staging directory was complete", t.name, dst.id)
	case !installed && ic.synced:
		r.failf("move %s/0: the install is gone from %s after a crash once its completion was synced", t.name, dst.id)
	case !moved:
		r.failf("move %s/0: failed with no fault", t.name)
	}
	if !installed {
		r.logf("move %s/0 cancelled: the crash took the install", t.name)
		r.cl.meta.setOwner(t.name, 0, src.id)
		r.checkTopic(t)
		return false
	}
	r.cl.meta.setOwner(t.name, 0, dst.id)
	r.must("drop the old owner's copy", src.n.DropPartition(r.ctx, t.name, 0))
	r.noCopy(src, t)
	t.parts[0].leases = map[int64]leaseModel{}
	r.res.Live.Moves++
	r.res.Live.InstallCrashes++
	r.checkTopic(t)
	return true
}
