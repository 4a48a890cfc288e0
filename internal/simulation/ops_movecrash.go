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
// directory's sync after it, came before the image; whole, whether the
// image was taken after the whole install (fewer calls than n).
type installCrash struct {
	n, seen                int
	img                    *sim.Disk
	plan                   sim.CrashPlan
	at                     time.Time
	renamed, synced, whole bool
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
// old disk is lost with it) and settles the move as package cluster's
// pull does. An install whose staging directory was not yet complete is
// gone; one whose completion was synced is there; between the two,
// either. Taken during the install, the crash stopped the pull before it
// handed the partition over: the pull is made again on the restarted
// dst (the partition still frozen) and completes, or the move is
// cancelled (the old owner owns the partition again, what dst installed
// dropped), drawn at random; never is the pre-crash install handed over.
// Taken after the whole install, the crash may have come after the
// metastore's change of owner: the install there is handed over (dst the
// owner, the old owner's copy dropped), and must hold everything. Every
// other partition dst owns is checked as after any crash.
func (r *runner) finishInstallCrash(t *topicModel, src, dst *member, ic *installCrash, moved bool) bool {
	if ic.img == nil {
		ic.whole = true
	}
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
	case !installed && ic.whole:
		r.failf("move %s/0: the install is gone from %s after a crash past its whole install, which the pull took for done", t.name, dst.id)
	}
	if !ic.whole || !installed {
		if r.rng.IntN(2) == 0 {
			r.logf("move %s/0 cancelled after the crash (installed %v)", t.name, installed)
			r.cl.meta.setOwner(t.name, 0, src.id)
			r.must("drop what the crashed move installed", dst.n.DropPartition(r.ctx, t.name, 0))
			r.noCopy(dst, t)
			r.checkTopic(t)
			return false
		}
		r.logf("move %s/0 pulled again after the crash (installed %v)", t.name, installed)
		if _, _, err := r.transfer(t, src, dst, false); err != nil {
			r.failf("move %s/0: the pull made again after the crash failed with no fault: %v", t.name, err)
		}
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
