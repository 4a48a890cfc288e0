package simulation

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	simSeed   = flag.Uint64("sim.seed", 1, "the simulation's seed")
	simRuns   = flag.Int("sim.runs", 0, "how many runs (default: 2,000, or 100 under the race detector)")
	simRun    = flag.Int("sim.run", -1, "replay this run alone (a violation names its seed and run)")
	simOps    = flag.String("sim.ops", "", "with -sim.run: replay only these operations, as a shrunk run's replay line lists them (3,17,42)")
	simShrink = flag.Int("sim.shrink", 500, "how many runs shrinking a violation may take; 0 shrinks nothing")
	simTwice  = flag.Bool("sim.twice", false, "run every run twice and fail any whose two executions part (exact replay)")
)

// TestSimulation runs the simulator's CI budget: runs 0 to N-1 of the
// seed, each a fresh node in its own bubble, each stopped at its first
// disagreement with the model, which fails the test with the run's replay
// line and operations, shrunk. Its last line of output is the summary.
// Long runs:
//
//	go test ./internal/simulation -run '^TestSimulation$' -timeout 0 -v -sim.seed=7 -sim.runs=100000
//	go test ./internal/simulation -run '^TestSimulation$' -v -sim.seed=7 -sim.run=1234
//	go test ./internal/simulation -run '^TestSimulation$' -v -sim.seed=7 -sim.run=1234 -sim.ops=3,17,42
func TestSimulation(t *testing.T) {
	first, runs := 0, *simRuns
	ops, err := ParseOps(*simOps)
	switch {
	case err != nil:
		t.Fatal(err)
	case ops != nil && *simRun < 0:
		t.Fatal("-sim.ops replays operations of one run: give -sim.run too")
	case *simRun >= 0:
		first, runs = *simRun, 1
	case runs == 0 && raceDetector:
		runs = 100
	case runs == 0:
		runs = 2000
	}
	began := time.Now()
	var total Result
	violations := 0
	var digest uint64 // every run's trace with its index, summed: equal digests, equal runs
	for run := first; run < first+runs; run++ {
		exec := func(ops []int) (res Result) {
			synctest.Test(t, func(*testing.T) { res = Run(*simSeed, run, Options{Ops: ops}) })
			return res
		}
		res := exec(ops)
		if *simTwice {
			again := exec(ops)
			if again.Trace != res.Trace || again.Calls != res.Calls || !slices.Equal(again.Log, res.Log) {
				t.Errorf("seed %d run %d: did not replay: trace %016x of %d calls, then %016x of %d calls",
					*simSeed, run, res.Trace, res.Calls, again.Trace, again.Calls)
			}
		}
		digest += mix(uint64(run), res.Trace)
		total.Ops += res.Ops
		total.Crashes += res.Crashes
		total.Faults += res.Faults
		total.Live.Add(res.Live)
		if res.Violation != "" {
			violations++
			var shrunk []int
			var shrunkRes Result
			if *simShrink > 0 {
				shrunk, shrunkRes = Shrink(res, exec, *simShrink)
			}
			t.Error(Report(*simSeed, run, res, shrunk, shrunkRes))
		} else if *simRun >= 0 {
			t.Logf("operations:\n  %s", joinLines(res.Log))
		}
	}
	t.Logf("seed %d, runs %d to %d in %v; trace digest %016x", *simSeed, first, first+runs-1, time.Since(began).Round(time.Millisecond), digest)
	if total.Ops == 0 {
		t.Error("the simulation ran no operation")
	}
	fmt.Printf("simulation: runs: %d, operations: %d, crashes: %d, faults: %d, violations: %d\n",
		runs, total.Ops, total.Crashes, total.Faults, violations)
	t.Logf("%v", total.Live)
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}
