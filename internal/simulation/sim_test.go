package simulation

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	simSeed     = flag.Uint64("sim.seed", 1, "the simulation's seed")
	simRuns     = flag.Int("sim.runs", 0, "how many runs (default: 2,000, or 100 under the race detector)")
	simFirst    = flag.Int("sim.first", 0, "the first run (runs first to first+runs-1)")
	simRun      = flag.Int("sim.run", -1, "replay this run alone (a violation names its seed and run)")
	simOps      = flag.String("sim.ops", "", "with -sim.run: replay only these operations, as a shrunk run's replay line lists them (3,17,42)")
	simParallel = flag.Int("sim.parallel", 1, "how many runs at once, each in a bubble of its own")
	simShrink   = flag.Int("sim.shrink", 500, "how many runs shrinking a violation may take; 0 shrinks nothing")
	simShrinkN  = flag.Int("sim.shrinkruns", 3, "how many failed runs are shrunk, the first to fail (the others are reported whole)")
	simTwice    = flag.Bool("sim.twice", false, "run every run twice and fail any whose two executions part (exact replay)")
)

// TestSimulation runs the simulator's CI budget: runs 0 to N-1 of the
// seed, each a fresh node in its own bubble, each stopped at its first
// disagreement with the model, which fails the test with the run's replay
// line and operations, shrunk. Its last line of output is the summary.
// Long runs (docs/durability.md, "The simulator"):
//
//	go test ./internal/simulation -run '^TestSimulation$' -timeout 0 -v -sim.seed=7 -sim.runs=100000 -sim.parallel=2
//	go test ./internal/simulation -run '^TestSimulation$' -v -sim.seed=7 -sim.run=1234
//	go test ./internal/simulation -run '^TestSimulation$' -v -sim.seed=7 -sim.run=1234 -sim.ops=3,17,42
func TestSimulation(t *testing.T) {
	b := batch{seed: *simSeed, first: *simFirst, runs: *simRuns, parallel: *simParallel, shrink: *simShrink, shrinkRuns: *simShrinkN, twice: *simTwice}
	ops, err := ParseOps(*simOps)
	switch {
	case err != nil:
		t.Fatal(err)
	case ops != nil && *simRun < 0:
		t.Fatal("-sim.ops replays operations of one run: give -sim.run too")
	case *simRun >= 0:
		b.first, b.runs, b.ops, b.verbose = *simRun, 1, ops, true
	case b.runs == 0 && raceDetector:
		b.runs = 100
	case b.runs == 0:
		b.runs = 2000
	}
	began := time.Now()
	sum := b.run(t)
	t.Logf("seed %d, runs %d to %d in %v, %d at once; trace digest %016x; faults met %d distinct (operation, fault) pairs",
		b.seed, b.first, b.first+b.runs-1, time.Since(began).Round(time.Millisecond), max(b.parallel, 1), sum.digest, len(sum.pairs))
	if sum.ops == 0 {
		t.Error("the simulation ran no operation")
	}
	t.Logf("%v", sum.live)
	fmt.Printf("simulation: runs: %d, operations: %d, crashes: %d, faults: %d, violations: %d\n",
		sum.runs, sum.ops, sum.crashes, sum.faults, sum.violations)
}
