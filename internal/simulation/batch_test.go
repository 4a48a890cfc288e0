package simulation

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// batch is a range of runs of one seed, run by parallel workers, each run
// in a bubble of its own. A run's file calls do not depend on what runs
// beside it (replay_test.go), so neither do the summary's counts.
type batch struct {
	seed        uint64
	first, runs int
	parallel    int
	ops         []int // with one run: only these operations (a shrunk run)
	shrink      int   // the runs shrinking a violation may take
	shrinkRuns  int   // how many failed runs are shrunk (the first to fail); the others are reported whole
	verbose     bool  // log every run's operations, not only a failed one's
	twice       bool  // run every run twice, failing where the two part
}

// summary is what a batch did. digest folds every run's trace with its
// index, in an order-free sum: equal digests, equal runs.
type summary struct {
	runs, ops, crashes, faults, violations int
	digest                                 uint64
	live                                   LiveCounts
	pairs                                  map[string]bool // "operation: fault" of every fault that fired
}

// exec runs one run of the batch's seed in a bubble of its own.
func (b batch) exec(t *testing.T, run int, opts Options) (res Result) {
	synctest.Test(t, func(*testing.T) { res = Run(b.seed, run, opts) })
	return res
}

// run runs the batch and fails t with the report of every run that
// violated the model, the first shrinkRuns of them shrunk: a bug that
// fails hundreds of runs would otherwise take hours to shrink them all.
func (b batch) run(t *testing.T) summary {
	var (
		failed atomic.Int64
		next   atomic.Int64
		mu     sync.Mutex
		sum    = summary{runs: b.runs, pairs: map[string]bool{}}
		wg     sync.WaitGroup
	)
	progressEvery := max(b.runs/10, 5000)
	for range max(b.parallel, 1) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.runs {
					return
				}
				run := b.first + i
				res := b.exec(t, run, Options{Ops: b.ops})
				if b.twice {
					again := b.exec(t, run, Options{Ops: b.ops})
					if again.Trace != res.Trace || again.Calls != res.Calls || !slices.Equal(again.Log, res.Log) {
						t.Errorf("seed %d run %d: did not replay: trace %016x of %d calls, then %016x of %d calls",
							b.seed, run, res.Trace, res.Calls, again.Trace, again.Calls)
					}
				}
				if res.Violation != "" {
					t.Error(b.report(t, run, res, failed.Add(1) <= int64(b.shrinkRuns)))
				} else if b.verbose {
					t.Logf("operations:\n  %s", strings.Join(res.Log, "\n  "))
				}
				mu.Lock()
				sum.ops += res.Ops
				sum.crashes += res.Crashes
				sum.faults += res.Faults
				sum.live.Add(res.Live)
				for _, p := range res.Pairs {
					sum.pairs[p] = true
				}
				sum.digest += mix(uint64(run), res.Trace)
				if res.Violation != "" {
					sum.violations++
				}
				mu.Unlock()
				if done := i + 1; done%progressEvery == 0 && done < b.runs {
					t.Logf("%d of %d runs done", done, b.runs)
				}
			}
		})
	}
	wg.Wait()
	return sum
}

// report is a failed run's report, shrunk within the batch's budget.
func (b batch) report(t *testing.T, run int, res Result, shrink bool) string {
	if b.shrink <= 0 || !shrink {
		return Report(b.seed, run, res, nil, Result{})
	}
	ops, shrunk := Shrink(res, func(ops []int) Result { return b.exec(t, run, Options{Ops: ops}) }, b.shrink)
	return Report(b.seed, run, res, ops, shrunk)
}
