// Package crashtest enumerates crash states: before every mutating call a
// workload makes on the simulated disk (fsys.Disk), it takes the images a
// power loss would leave there, in every crash mode the disk has, and
// keeps the distinct ones with the workload's model of what it had
// promised at that point. A test then starts a fresh node (or log) on
// each image and checks the fault model's invariants against the model.
//
// It is test support: it imports nothing of the engine but the seam, so
// both the runtime's own tests and the crash campaign use it.
package crashtest

import (
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/narad-io/storage/internal/fsys"
)

// Mutating are the calls an image is taken before: every call that changes
// what a power loss could leave.
var Mutating = map[fsys.Op]bool{
	fsys.OpOpen: true, fsys.OpWrite: true, fsys.OpSync: true, fsys.OpTruncate: true,
	fsys.OpMkdir: true, fsys.OpRemove: true, fsys.OpRename: true, fsys.OpSyncDir: true,
}

// Image is the disk a power loss leaves at one point of a workload, with
// the workload's model as it stood there.
type Image[M any] struct {
	Disk  *fsys.Disk
	Model M
	Label string // where and how: replays the state with the seed
	// Garbage: torn sectors hold random bytes, which also destroys the
	// synced bytes sharing a sector with an unsynced write. No format
	// without padding survives that media damage, so the fault model asks
	// I1, I2 and I10 of such an image (matrix row 4), not I4.
	Garbage bool
}

// Explorer takes crash images of a disk before every mutating call, in
// every crash mode the simulated disk has: unsynced data dropped, kept,
// torn at sectors (zeros, and garbage), each combined with every prefix of
// the namespace changes no directory sync has made durable yet. Images
// are deduplicated by their hash and the model's, so the count is of
// distinct states, and an image the workload has since promised more of
// (a record acked) is checked against that promise too.
type Explorer[M any] struct {
	mu       sync.Mutex // calls may come from the workload and from the node's goroutines
	disk     *fsys.Disk
	snapshot func() M // the workload's model at the image's point
	seen     map[[2]uint64]bool
	images   []Image[M]
	calls    int
}

// NewExplorer explores d; snapshot returns a copy of the workload's model.
func NewExplorer[M any](d *fsys.Disk, snapshot func() M) *Explorer[M] {
	return &Explorer[M]{disk: d, snapshot: snapshot, seen: map[[2]uint64]bool{}}
}

// Hook is the disk hook that takes the images; Run installs it.
func (e *Explorer[M]) Hook(c fsys.Call) error {
	if !Mutating[c.Op] {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	e.take(fmt.Sprintf("before call %d (%s %s)", e.calls, c.Op, c.Path))
	return nil
}

// take adds the images of the disk as it is now; the caller holds mu.
func (e *Explorer[M]) take(label string) {
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
			e.images = append(e.images, Image[M]{Disk: img, Model: model, Garbage: plan.Garbage,
				Label: fmt.Sprintf("%s, %d of %d name ops kept, plan %d", label, keep, names, i)})
		}
	}
}

// Run runs op with the explorer's hook on the disk and takes the images of
// its end state too.
func (e *Explorer[M]) Run(op func()) {
	e.disk.SetHook(e.Hook)
	op()
	e.disk.SetHook(nil)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.take("after the last call")
}

// Images are the distinct images taken, in the order taken.
func (e *Explorer[M]) Images() []Image[M] {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.images
}

// Calls is how many mutating calls the workload made.
func (e *Explorer[M]) Calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}
