package campaign

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// Report counts what a campaign explored. States are distinct: crash
// images by the hash of the disk and of the model, damaged states by
// (file, sector, kind), injected failures by (call, kind).
type Report struct {
	CrashStates int
	Damaged     int
	Injected    int
	Violations  []string // each names its state: seed, variant, call or sector, mode
	// Excluded are damaged states in the fault model's one excluded case
	// (row 7: the last frames of the active segment damaged), counted
	// among Damaged.
	Excluded int
}

func (r *Report) add(o Report) {
	r.CrashStates += o.CrashStates
	r.Damaged += o.Damaged
	r.Injected += o.Injected
	r.Excluded += o.Excluded
	r.Violations = append(r.Violations, o.Violations...)
}

// String is the campaign's summary line, exactly as CI prints it last.
func (r Report) String() string {
	return fmt.Sprintf("campaign: crash states explored: %d, damaged states: %d, injected failures: %d, violations: %d",
		r.CrashStates, r.Damaged, r.Injected, len(r.Violations))
}

// Budget sizes a campaign.
type Budget struct {
	Seeds       []uint64 // each runs every part
	CrashEvery  int      // check one crash image in every
	DamageEvery int      // check one damaged state in every
	FaultEvery  int      // fail one mutating call in every
	AllFailures bool     // fail each call in every way it can fail, not one way per call
}

// CI is the budget CI runs: every crash state and every damaged sector
// of three seeds, every call of the first failed once.
var CI = Budget{Seeds: []uint64{1, 2, 3}, CrashEvery: 1, DamageEvery: 1, FaultEvery: 1}

// Run runs every part of the campaign and sums their reports.
func (b Budget) Run(ctx context.Context, bubble Bubble) Report {
	var total Report
	seen := newStateSet()
	for i, seed := range b.Seeds {
		parts := []Report{Crash(ctx, bubble, seed, b.CrashEvery, seen), Damage(ctx, bubble, seed, b.DamageEvery)}
		if i == 0 { // failing every call of one seed's run is the budget; the long campaign varies the rest
			parts = append(parts, Faults(ctx, bubble, seed, b.FaultEvery, b.AllFailures, seen))
		}
		for _, r := range parts {
			total.add(r)
		}
	}
	return total
}

// A Bubble runs f in a synctest bubble (the workload sleeps on its fake
// clock); a test passes one made of synctest.Test.
type Bubble func(f func())

// checkers checks states on every core while the workload makes more:
// check is called for each state sent on the returned channel, and wait
// closes it and returns the violations found.
type checkers[S any] struct {
	states chan S
	wg     sync.WaitGroup
	mu     sync.Mutex
	found  []string
}

func startCheckers[S any](check func(S) error) *checkers[S] {
	c := &checkers[S]{states: make(chan S, 2*runtime.GOMAXPROCS(0))}
	for range runtime.GOMAXPROCS(0) {
		c.wg.Go(func() {
			for s := range c.states {
				if err := check(s); err != nil {
					c.mu.Lock()
					c.found = append(c.found, err.Error())
					c.mu.Unlock()
				}
			}
		})
	}
	return c
}

func (c *checkers[S]) wait() []string {
	close(c.states)
	c.wg.Wait()
	return c.found
}

// stateSet is the set of distinct states a campaign has checked.
type stateSet struct {
	mu   sync.Mutex
	seen map[[2]uint64]bool
}

func newStateSet() *stateSet { return &stateSet{seen: map[[2]uint64]bool{}} }

// add reports whether h is new, adding it.
func (s *stateSet) add(h [2]uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[h] {
		return false
	}
	s.seen[h] = true
	return true
}
