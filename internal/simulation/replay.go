package simulation

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Options change what a run of (seed, run) does: by default, every
// operation the run draws.
type Options struct {
	// Ops, when not nil, runs only these operations of the run, by their
	// index in the whole run, each drawing from its own random source as
	// it would in the whole run (opRand): a shrunk run (Shrink).
	Ops []int

	// plant, in tests, is a violation the run stops at: after every
	// operation it is handed the run's log so far, and a non-empty answer
	// is the violation (shrink_test.go plants one to test Shrink).
	plant func(log []string) string
	// keepTrace, in tests, keeps every file call of the run in
	// Result.Lines, to show where two executions part.
	keepTrace bool
}

// runs reports whether operation i of the whole run is run.
func (o Options) runs(i int) bool { return o.Ops == nil || slices.Contains(o.Ops, i) }

// opRand is operation i's random source: a function of (seed, run, i)
// alone, so an operation draws the same numbers, the same kind of
// operation first, whichever operations ran before it. Dropping
// operations from a run (shrinking) leaves every other one as it was
// drawn; what its numbers choose among (a topic, a leased offset) is the
// model's state at that point.
func opRand(seed uint64, run, i int) *rand.Rand {
	return rand.New(rand.NewPCG(mix(seed, uint64(run)), mix(uint64(i), 0x6f70)))
}

// mix is splitmix64's finalizer over a and b: independent streams from
// neighbouring indices.
func mix(a, b uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 + b + 0x632be59bd9b4e019
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// ReplayLine is the command that replays run of seed alone; with ops, only
// those of its operations (a shrunk run).
func ReplayLine(seed uint64, run int, ops []int) string {
	line := fmt.Sprintf("go test ./internal/simulation -run '^TestSimulation$' -v -sim.seed=%d -sim.run=%d", seed, run)
	if ops != nil {
		line += " -sim.ops=" + FormatOps(ops)
	}
	return line
}

// FormatOps writes a list of operations as -sim.ops takes it: 3,17,42.
func FormatOps(ops []int) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = strconv.Itoa(o)
	}
	return strings.Join(s, ",")
}

// ParseOps reads a list FormatOps wrote; "" is nil (every operation).
func ParseOps(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	ops := []int{}
	for _, f := range strings.Split(s, ",") {
		o, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || o < 0 {
			return nil, fmt.Errorf("simulation: operation %q: not an index", f)
		}
		ops = append(ops, o)
	}
	slices.Sort(ops)
	return slices.Compact(ops), nil
}
