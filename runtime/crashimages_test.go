package runtime

import (
	"fmt"
	"hash/fnv"
	"sync"
	"testing"

	"github.com/narad-io/storage/internal/fsys"
)

// mutating are the calls a crash image is taken before: every call that
// changes what a power loss could leave.
var mutating = map[fsys.Op]bool{
	fsys.OpOpen: true, fsys.OpWrite: true, fsys.OpSync: true, fsys.OpTruncate: true,
	fsys.OpMkdir: true, fsys.OpRemove: true, fsys.OpRename: true, fsys.OpSyncDir: true,
}

// crashImage is the disk a power loss leaves at one point of a workload,
// with the workload's model as it stood there.
type crashImage[M any] struct {
	disk  *fsys.Disk
	model M
	label string
	// garbage: torn sectors hold random bytes, which also destroys the
	// synced bytes sharing a sector with an unsynced write. No format
	// without padding survives that media damage, so the fault model asks
	// I1, I2 and I10 of such an image (matrix row 4), not I4.
	garbage bool
}

// crashExplorer takes crash images of a disk before every mutating call,
// in every crash mode the simulated disk has: unsynced data dropped, kept,
// torn at sectors (zeros, and garbage), each combined with every prefix of
// the namespace changes no directory sync has made durable yet. Images
// are deduplicated by their hash and the model's, so the count is of
// distinct states, and an image the workload has since promised more of
// (a record acked) is checked against that promise too.
type crashExplorer[M any] struct {
	mu       sync.Mutex // calls may come from the workload and from the node's goroutines
	disk     *fsys.Disk
	snapshot func() M // the workload's model at the image's point
	seen     map[[2]uint64]bool
	images   []crashImage[M]
	calls    int
}

func newCrashExplorer[M any](d *fsys.Disk, snapshot func() M) *crashExplorer[M] {
	return &crashExplorer[M]{disk: d, snapshot: snapshot, seen: map[[2]uint64]bool{}}
}

// hook is the disk hook that takes the images; install it with SetHook.
func (e *crashExplorer[M]) hook(c fsys.Call) error {
	if !mutating[c.Op] {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	e.take(fmt.Sprintf("before call %d (%s %s)", e.calls, c.Op, c.Path))
	return nil
}

// take adds the images of the disk as it is now; the caller holds mu.
func (e *crashExplorer[M]) take(label string) {
	model := e.snapshot()
	modelHash := fnv.New64a()
	fmt.Fprint(modelHash, model)
	names := e.disk.PendingNameOps()
	for keep := 0; keep <= names; keep++ {
		for i, plan := range []fsys.CrashPlan{
			{Data: fsys.DropUnsynced},
			{Data: fsys.KeepUnsynced},
			{Data: fsys.TearUnsynced, Seed: uint64(e.calls)},
			{Data: fsys.TearUnsynced, Garbage: true, Seed: uint64(e.calls) + 1},
		} {
			plan.KeepNameOps = keep
			img := e.disk.Crash(plan)
			h := [2]uint64{img.Hash(), modelHash.Sum64()}
			if e.seen[h] {
				continue
			}
			e.seen[h] = true
			e.images = append(e.images, crashImage[M]{disk: img, model: model, garbage: plan.Garbage,
				label: fmt.Sprintf("%s, %d of %d name ops kept, plan %d", label, keep, names, i)})
		}
	}
}

// run runs op with the explorer's hook on and takes the images of its end
// state too.
func (e *crashExplorer[M]) run(t *testing.T, op func()) {
	t.Helper()
	e.disk.SetHook(e.hook)
	op()
	e.disk.SetHook(nil)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.take("after the last call")
}
