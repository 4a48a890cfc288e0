// Package crashtest enumerates crash states: before every mutating call a
// workload makes on the simulated disk (sim.Disk), it takes the images a
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
	"os"
	"sync"

	"github.com/narad-io/storage/vfs/sim"
)

// Mutating reports whether an image is taken before a call: whether it
// may change what a power loss could leave (an open only when it may
// create or truncate; a read-only open in a background loop would make
// the count of calls depend on scheduling).
func Mutating(c sim.Call) bool {
	switch c.Op {
	case sim.OpOpen:
		return c.Flag&(os.O_CREATE|os.O_TRUNC) != 0
	case sim.OpWrite, sim.OpSync, sim.OpTruncate, sim.OpMkdir, sim.OpRemove, sim.OpRename, sim.OpSyncDir:
		return true
	}
	return false
}

// Image is the disk a power loss leaves at one point of a workload, with
// the workload's model as it stood there.
type Image[M any] struct {
	Disk  *sim.Disk
	Model M
	Label string // where and how: replays the state with the seed
	// Hash identifies the state: the image's hash and the model's. Two
	// explorers' images with one hash are one state.
	Hash [2]uint64
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
	disk     *sim.Disk
	snapshot func() M // the workload's model at the image's point
	seen     map[[2]uint64]bool
	images   []Image[M]
	calls    int

	// Emit, when set before Run, receives each distinct image as it is
	// taken instead of the explorer keeping it (so a long workload's
	// images need not fit in memory at once). It is called with the
	// workload stopped in a disk call.
	Emit func(Image[M])
	// Fail, when set before Run, is asked after the images of each
	// mutating call are taken; an error it returns fails the call (an
	// injected fault), and it may put a fault of its own in force on the
	// disk for the call (a lie, a short write).
	Fail func(call int, c sim.Call) error
	// Take, when set before Run, chooses the calls (1-based, in the order
	// made) before which images are taken; nil takes them before every
	// mutating call. The end state's images are always taken.
	Take func(call int) bool
	// Plans, when set before Run, replaces the crash plans taken at each
	// point (the fixed modes and Sectors) with its own, e.g. randomized
	// ones; names is how many namespace changes are pending there.
	Plans func(call, names int) []sim.CrashPlan
	// Sectors adds, at every point, images that keep chosen sectors of
	// the unsynced writes (docs/durability.md rows 2 to 5): every prefix
	// of each file's unsynced sectors (zeros beyond, and garbage beyond),
	// every single hole, and the new size with no data at all.
	Sectors bool
}

// NewExplorer explores d; snapshot returns a copy of the workload's model.
func NewExplorer[M any](d *sim.Disk, snapshot func() M) *Explorer[M] {
	return &Explorer[M]{disk: d, snapshot: snapshot, seen: map[[2]uint64]bool{}}
}

// Hook is the disk hook that takes the images; Run installs it.
func (e *Explorer[M]) Hook(c sim.Call) error {
	if !Mutating(c) {
		return nil
	}
	e.mu.Lock()
	e.calls++
	call := e.calls
	if e.Take == nil || e.Take(call) {
		e.take(fmt.Sprintf("before call %d (%s %s)", call, c.Op, c.Path))
	}
	e.mu.Unlock()
	if e.Fail != nil {
		return e.Fail(call, c)
	}
	return nil
}

// take adds the images of the disk as it is now; the caller holds mu.
func (e *Explorer[M]) take(label string) {
	model := e.snapshot()
	modelHash := fnv.New64a()
	fmt.Fprint(modelHash, model)
	names := e.disk.PendingNameOps()
	add := func(plan sim.CrashPlan, how string) {
		img := e.disk.Crash(plan)
		h := [2]uint64{img.Hash(), modelHash.Sum64()}
		if e.seen[h] {
			return
		}
		e.seen[h] = true
		image := Image[M]{Disk: img, Model: model, Garbage: plan.Garbage, Hash: h,
			Label: fmt.Sprintf("%s, %d of %d name ops kept, %s", label, plan.KeepNameOps, names, how)}
		if e.Emit != nil {
			e.Emit(image)
			return
		}
		e.images = append(e.images, image)
	}
	if e.Plans != nil {
		for i, plan := range e.Plans(e.calls, names) {
			add(plan, fmt.Sprintf("plan %d", i))
		}
		return
	}
	for keep := 0; keep <= names; keep++ {
		add(sim.CrashPlan{Data: sim.DropUnsynced, KeepNameOps: keep}, "unsynced dropped")
		add(sim.CrashPlan{Data: sim.KeepUnsynced, KeepNameOps: keep}, "unsynced kept")
		add(sim.CrashPlan{Data: sim.TearUnsynced, Seed: uint64(e.calls), KeepNameOps: keep},
			fmt.Sprintf("torn, seed %d", e.calls))
		add(sim.CrashPlan{Data: sim.TearUnsynced, Garbage: true, Seed: uint64(e.calls) + 1, KeepNameOps: keep},
			fmt.Sprintf("torn into garbage, seed %d", e.calls+1))
	}
	if e.Sectors {
		e.takeSectors(add, names)
	}
}

// takeSectors adds the chosen-sector images of Sectors, with every
// pending namespace change kept.
func (e *Explorer[M]) takeSectors(add func(sim.CrashPlan, string), names int) {
	unsynced := e.disk.UnsyncedSectors()
	longest := 0
	for _, list := range unsynced {
		longest = max(longest, len(list))
	}
	// keeps reports whether the i-th unsynced sector of its file is kept.
	plan := func(garbage bool, keeps func(i int) bool) sim.CrashPlan {
		return sim.CrashPlan{
			Data: sim.TearUnsynced, Garbage: garbage, Seed: uint64(e.calls), KeepNameOps: names,
			KeepNewSize: func(string) bool { return true },
			KeepSector: func(p string, sector int64) bool {
				for i, s := range unsynced[p] {
					if s == sector {
						return keeps(i)
					}
				}
				return false
			},
		}
	}
	add(plan(false, func(int) bool { return false }), "new sizes without data")
	for n := 1; n < longest; n++ {
		add(plan(false, func(i int) bool { return i < n }), fmt.Sprintf("first %d unsynced sectors kept", n))
		add(plan(true, func(i int) bool { return i < n }), fmt.Sprintf("first %d unsynced sectors kept, garbage beyond", n))
	}
	for hole := range longest {
		add(plan(false, func(i int) bool { return i != hole }), fmt.Sprintf("unsynced sector %d lost", hole))
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
