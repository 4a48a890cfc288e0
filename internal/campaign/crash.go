package campaign

import (
	"context"
	"fmt"
	"sync"

	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
)

// Crash explores every crash state of the reference workload in each
// variant (CrashStates, with the sector patterns on) and checks each on a
// fresh node. every thins the check to one image in every (1 checks all;
// the race detector's CI run thins it, the plain run does not).
func Crash(ctx context.Context, bubble Bubble, seed uint64, every int, seen *stateSet) Report {
	var r Report
	for _, v := range Variants {
		label := fmt.Sprintf("seed %d, %s", seed, v)
		c := startCheckers(func(img crashtest.Image[Model]) error {
			if err := CheckCrashState(ctx, img, seed); err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			return nil
		})
		taken := 0
		var runErr error
		bubble(func() {
			w, err := newRun(seed)
			if err != nil {
				runErr = err
				return
			}
			explore := w.explorer()
			explore.Sectors = true
			explore.Emit = func(img crashtest.Image[Model]) {
				if taken%every == 0 && seen.add(img.Hash) {
					c.states <- img
					r.CrashStates++
				}
				taken++
			}
			explore.Run(func() { runErr = w.workload(ctx, v, seed, Options{}) })
		})
		r.Violations = append(r.Violations, c.wait()...)
		if runErr != nil {
			r.Violations = append(r.Violations, fmt.Sprintf("%s: the workload failed with nothing injected: %v", label, runErr))
		}
	}
	return r
}

// newDisk is a fresh simulated disk holding the data directory, durably.
func newDisk(seed uint64) (*sim.Disk, error) {
	d := sim.NewDisk(seed)
	if err := d.MkdirAll(DataDir); err != nil {
		return nil, err
	}
	return d, d.SyncDir("/")
}

// A run is one run of the workload: a fresh disk and the model, which
// the explorer snapshots from the disk's hook while the workload updates
// it, so both go through lock.
type run struct {
	d  *sim.Disk
	mu sync.Mutex
	m  Model
}

func newRun(seed uint64) (*run, error) {
	d, err := newDisk(seed)
	return &run{d: d}, err
}

func (r *run) lock(f func()) { r.mu.Lock(); defer r.mu.Unlock(); f() }

func (r *run) snapshot() Model { r.mu.Lock(); defer r.mu.Unlock(); return r.m.clone() }

// explorer is a crash explorer of the run's disk and model.
func (r *run) explorer() *crashtest.Explorer[Model] { return crashtest.NewExplorer(r.d, r.snapshot) }

// workload runs the reference workload on the run's disk.
func (r *run) workload(ctx context.Context, v Variant, seed uint64, opts Options) error {
	return Run(ctx, r.d, v, seed, &r.m, r.lock, opts)
}

// CheckCrashState starts a fresh node on a crash image and checks it
// against the model (docs/durability.md's invariants; checkAgainst has the rest):
//   - I2: the node starts, and a second start on the same image serves
//     the same bounds and the same records;
//   - I6: the next commit lands exactly at the high watermark, and reads
//     back.
//
// It returns the first violation, naming the image.
func CheckCrashState(ctx context.Context, img crashtest.Image[Model], seed uint64) error {
	if err := checkDisk(ctx, img.Disk, img.Model, seed, !img.Garbage); err != nil {
		return fmt.Errorf("%s: %w", img.Label, err)
	}
	return nil
}

// checkDisk is CheckCrashState on any disk with no process running on it.
func checkDisk(ctx context.Context, d *sim.Disk, m Model, seed uint64, honest bool) error {
	first, err := observe(ctx, d, m, seed, nil, nil)
	if err != nil {
		return err
	}
	if err := checkAgainst(first, m, honest); err != nil {
		return err
	}
	_, err = observe(ctx, d, m, seed, nil, func(n *runtime.Node, second observation) error {
		if first.found != second.found || first.gen != second.gen || first.start != second.start || first.hwm != second.hwm ||
			!sameOffsets(first.served, second.served) || first.frontier != second.frontier {
			return fmt.Errorf("a second start serves [%d, %d) (%d records), the first [%d, %d) (%d records) (I2)",
				second.start, second.hwm, len(second.served), first.start, first.hwm, len(first.served))
		}
		if !second.found {
			return nil
		}
		return checkNextCommit(ctx, n, seed, second)
	})
	return err
}

// checkNextCommit commits one record on n and checks it lands at the high
// watermark the observation saw and reads back (I6).
func checkNextCommit(ctx context.Context, n *runtime.Node, seed uint64, obs observation) error {
	want := Value(seed, obs.gen, obs.hwm)
	base, err := n.Produce(ctx, Topic, 0, []partition.Record{{Value: want}})
	if err != nil || base != obs.hwm {
		return fmt.Errorf("the next commit lands at %d, %v; the high watermark was %d (I6)", base, err, obs.hwm)
	}
	res, err := n.Read(ctx, Topic, 0, base, 1, 1<<20)
	if err != nil || len(res.Records) != 1 || string(res.Records[0].Value) != string(want) {
		return fmt.Errorf("the next commit at %d does not read back: %v (I6)", base, err)
	}
	return nil
}
