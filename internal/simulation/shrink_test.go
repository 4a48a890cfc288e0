package simulation

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
)

// crashAfterRetention is a violation planted for the test: it fires once
// the run has crashed after a retention change, whatever came between.
func crashAfterRetention(log []string) string {
	retention := false
	for _, l := range log {
		switch {
		case opLine.MatchString(l) && strings.Contains(l, ": retention "):
			retention = true
		case retention && opLine.MatchString(l) && strings.Contains(l, ": crash: "):
			return "a crash after a retention change"
		}
	}
	return ""
}

var opLine = regexp.MustCompile(`^\d+: `)

// TestShrink_APlantedViolationShrinksToItsTwoOperations: a run that
// fails a planted check (a crash after a retention change) late in the
// run shrinks to the two operations that make it fail, and the shrunk
// list, read back from its replay line, fails the same check again.
func TestShrink_APlantedViolationShrinksToItsTwoOperations(t *testing.T) {
	exec := func(run int, ops []int) (res Result) {
		synctest.Test(t, func(*testing.T) { res = Run(1, run, Options{Ops: ops, plant: crashAfterRetention}) })
		return res
	}
	// The first run of seed 1 that fails it after 15 operations or more.
	run, failed := 0, Result{}
	for ; run < 50; run++ {
		if failed = exec(run, nil); failed.Check == "planted: %s" && len(failed.Ran) >= 15 {
			break
		}
	}
	if run == 50 {
		t.Fatal("no run of seed 1 up to 50 crashes after a retention change at its 15th operation or later")
	}
	tries := 0
	ops, shrunk := Shrink(failed, func(ops []int) Result { tries++; return exec(run, ops) }, 200)
	t.Logf("run %d: %d operations shrank to %v in %d runs", run, len(failed.Ran), ops, tries)
	if len(ops) != 2 || shrunk.Check != failed.Check {
		t.Fatalf("run %d of %d operations shrank to %v (%q), want a retention change and a crash:\n%s",
			run, len(failed.Ran), ops, shrunk.Violation, strings.Join(shrunk.Log, "\n"))
	}
	first := fmt.Sprintf("%d: ", ops[0])
	if !slices.ContainsFunc(shrunk.Log, func(l string) bool { return strings.HasPrefix(l, first) && strings.Contains(l, ": retention ") }) {
		t.Fatalf("shrunk run of %v: its first operation changes no retention:\n%s", ops, strings.Join(shrunk.Log, "\n"))
	}
	line := ReplayLine(1, run, ops)
	report := Report(1, run, failed, ops, shrunk)
	if !strings.Contains(report, line) {
		t.Fatalf("the report does not give the shrunk run's replay line %q:\n%s", line, report)
	}
	listed, err := ParseOps(line[strings.LastIndex(line, "-sim.ops=")+len("-sim.ops="):])
	if err != nil || !slices.Equal(listed, ops) {
		t.Fatalf("the replay line %q lists %v (%v), want %v", line, listed, err, ops)
	}
	if again := exec(run, listed); again.Check != failed.Check || again.Trace != shrunk.Trace {
		t.Fatalf("the shrunk run replayed: %q, trace %016x; want %q, trace %016x", again.Violation, again.Trace, shrunk.Violation, shrunk.Trace)
	}
}
