package simulation

import (
	"fmt"
	"strings"
)

// Shrink looks for a short list of a failed run's operations that fails
// the same check again: delta debugging (Zeller's ddmin) over the
// operations the run ran up to its violation. exec runs a list of the
// run's operations (Options.Ops), each in a bubble of its own; Shrink
// stops after at most budget of them. Every operation draws from its own
// source (opRand), so a list replays the same wherever it is cut, and
// Shrink's answer is the same every time.
//
// It returns the shortest failing list it found (failed's own, if none
// shorter fails) and that list's run.
func Shrink(failed Result, exec func(ops []int) Result, budget int) (ops []int, res Result) {
	ops, res = failed.Ran, failed
	runs := 0
	fails := func(cand []int) (Result, bool) {
		runs++
		r := exec(cand)
		return r, r.Check == failed.Check
	}
	n := 2
	for len(ops) >= 2 && runs < budget {
		chunks := split(ops, n)
		cands := chunks // a chunk alone: the list shrinks to it, n back to 2
		if n > 2 {
			// then everything but a chunk (for n = 2 the chunks again)
			cands = append(cands, complements(ops, chunks)...)
		}
		reduced := false
		for i, cand := range cands {
			if runs >= budget {
				break
			}
			if r, ok := fails(cand); ok {
				ops, res, reduced = r.Ran, r, true
				if i < len(chunks) {
					n = 2
				} else {
					n = max(n-1, 2)
				}
				break
			}
		}
		if reduced {
			continue
		}
		if n >= len(ops) {
			break // no single operation can go: 1-minimal
		}
		n = min(2*n, len(ops))
	}
	return ops, res
}

// split cuts ops into n chunks of near equal length, in order.
func split(ops []int, n int) [][]int {
	n = min(n, len(ops))
	out := make([][]int, 0, n)
	for i := range n {
		out = append(out, ops[i*len(ops)/n:(i+1)*len(ops)/n])
	}
	return out
}

// complements lists, for each chunk, ops without it.
func complements(ops []int, chunks [][]int) [][]int {
	out := make([][]int, 0, len(chunks))
	at := 0
	for _, c := range chunks {
		rest := make([]int, 0, len(ops)-len(c))
		rest = append(append(rest, ops[:at]...), ops[at+len(c):]...)
		out = append(out, rest)
		at += len(c)
	}
	return out
}

// Report formats a failed run: the violation, the command that replays
// it and its operations; then, when shrinking found a shorter list, the
// command that replays that and its run's operations.
func Report(seed uint64, run int, res Result, shrunk []int, shrunkRes Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "simulation: seed %d run %d: %s\nreplay: %s\noperations:\n  %s",
		seed, run, res.Violation, ReplayLine(seed, run, nil), strings.Join(res.Log, "\n  "))
	if shrunk != nil && len(shrunk) < len(res.Ran) {
		fmt.Fprintf(&b, "\nshrunk from %d to %d operations: %s\nreplay: %s\noperations:\n  %s",
			len(res.Ran), len(shrunk), shrunkRes.Violation, ReplayLine(seed, run, shrunk), strings.Join(shrunkRes.Log, "\n  "))
	}
	return b.String()
}
