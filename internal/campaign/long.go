package campaign

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/vfs/sim"
)

// The long campaign's randomized runs (fault model, "Figures to reach",
// nightly): each run draws from (seed, run) a variant, a workload seed, a
// probability (0, 1 % or 10 %) with which every fsync of the run lies,
// the points it crashes at (each mutating call with probability
// longCrashOdds) and, at each, longPlans random crash plans: each
// unsynced sector kept with a random probability from 0 to 100 % (the
// Pebble-style unsynced percentage), the lost ones zeros or garbage
// (the FoundationDB kill model), a random prefix of the pending namespace
// changes kept. After the run, one damaged state: a random sector of a
// random file bit-flipped, zeroed or failing reads (CORDS single
// faults). Every state's label starts with its seed and run, and a run
// replays exactly from them (LongRun).
const (
	longCrashOdds = 0.3
	longPlans     = 2
)

var lieOdds = []float64{0, 0.01, 0.10}

// Long checks states randomized runs until at least states are done,
// runs first, first+1, ... of seed; each run's report goes to progress
// (which may be nil) as it completes.
func Long(ctx context.Context, bubble Bubble, seed uint64, first, states int, progress func(run int, r Report)) Report {
	var total Report
	seen := newStateSet()
	for run := first; total.CrashStates+total.Damaged < states; run++ {
		r := LongRun(ctx, bubble, seed, run, seen)
		if progress != nil {
			progress(run, r)
		}
		total.add(r)
	}
	return total
}

// LongRun is one randomized run, checked; seen keeps the distinct states
// across runs (a fresh set replays a run alone). Injected counts its lies.
func LongRun(ctx context.Context, bubble Bubble, seed uint64, run int, seen *stateSet) Report {
	var r Report
	rng := rand.New(rand.NewPCG(seed, uint64(run)))
	v := Variants[rng.IntN(len(Variants))]
	wseed := rng.Uint64()
	lie := lieOdds[rng.IntN(len(lieOdds))]
	label := fmt.Sprintf("seed %d run %d (%s, workload seed %d, fsync lies %.0f %%)", seed, run, v, wseed, 100*lie)
	c := startCheckers(func(check func() error) error { return check() })
	var end *sim.Disk
	var m Model
	var runErr error
	bubble(func() {
		w, err := newRun(wseed)
		if err != nil {
			runErr = err
			return
		}
		d := w.d
		explore := w.explorer()
		// The explorer calls Take, Plans and Fail in call order, with
		// the workload stopped: one stream of draws replays exactly.
		draws := rand.New(rand.NewPCG(seed, uint64(run)<<32|1))
		var drawsMu sync.Mutex // the explorer holds its own lock for Take and Plans, not for Fail
		explore.Take = func(int) bool {
			drawsMu.Lock()
			defer drawsMu.Unlock()
			return draws.Float64() < longCrashOdds
		}
		explore.Plans = func(call, names int) []sim.CrashPlan {
			drawsMu.Lock()
			defer drawsMu.Unlock()
			plans := make([]sim.CrashPlan, longPlans)
			for i := range plans {
				keep := draws.Float64()
				sectors := rand.New(rand.NewPCG(draws.Uint64(), 0))
				plans[i] = sim.CrashPlan{
					Data: sim.TearUnsynced, Seed: draws.Uint64(), Garbage: draws.IntN(2) == 0,
					KeepNameOps: draws.IntN(names + 1),
					KeepSector:  func(string, int64) bool { return sectors.Float64() < keep },
				}
			}
			return plans
		}
		explore.Fail = func(_ int, c sim.Call) error {
			drawsMu.Lock()
			defer drawsMu.Unlock()
			if (c.Op == sim.OpSync || c.Op == sim.OpSyncDir) && draws.Float64() < lie {
				w.lock(func() { w.m.noteLie(c) })
				d.Inject(sim.Fault{Op: c.Op, Path: c.Path, Nth: 1, Lie: true})
				r.Injected++
			}
			return nil
		}
		explore.Emit = func(img crashtest.Image[Model]) {
			if !seen.add(img.Hash) {
				return
			}
			r.CrashStates++
			c.states <- func() error {
				if err := CheckCrashState(ctx, img, wseed); err != nil {
					return fmt.Errorf("%s: %w", label, err)
				}
				return nil
			}
		}
		explore.Run(func() { runErr = w.workload(ctx, v, wseed, Options{}) })
		end, m = d.ProcessCrash(), w.snapshot()
	})
	if runErr != nil {
		r.Violations = append(r.Violations, fmt.Sprintf("%s: the workload failed: %v", label, runErr))
	} else if !m.lied() {
		// A single fault on a random block of the clean end state.
		damage, err := oneDamage(ctx, end, m, wseed, rng)
		if err != nil {
			r.Violations = append(r.Violations, fmt.Sprintf("%s: %v", label, err))
		} else {
			r.Damaged++
			c.states <- func() error {
				if err := damage(); err != nil {
					return fmt.Errorf("%s: %w", label, err)
				}
				return nil
			}
		}
	}
	r.Violations = append(r.Violations, c.wait()...)
	return r
}

// oneDamage draws one damaged state of the clean disk end and returns
// its check.
func oneDamage(ctx context.Context, end *sim.Disk, m Model, seed uint64, rng *rand.Rand) (func() error, error) {
	clean := end.Crash(sim.CrashPlan{Data: sim.KeepUnsynced})
	want, err := observe(ctx, clean.Crash(sim.CrashPlan{}), m, seed, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("the clean end state: %w", err)
	}
	damages, err := damagesOf(clean, seed)
	if err != nil || len(damages) == 0 {
		return nil, fmt.Errorf("listing the clean end state: %d damages, %v", len(damages), err)
	}
	dm := damages[rng.IntN(len(damages))]
	active := activeSegment(damages)
	dm.active = dm.file == active
	return func() error {
		err := checkDamage(ctx, clean, dm, m, seed, want, isSegment(dm.file) && !dm.active)
		if err != nil && !errors.Is(err, errExcluded) {
			return fmt.Errorf("damage %s: %w", dm, err)
		}
		return nil
	}, nil
}
