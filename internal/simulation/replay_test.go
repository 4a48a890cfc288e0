package simulation

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// replayRuns are the runs the replay tests execute again and again: between
// them crashes, clean restarts, a topic's delete and recreate, retention
// changes, drains and evictions, cursors, long polls, waiting consumes,
// concurrent producers and the disk floor; and, in runs 11 and 14 (cluster
// runs), moves, a drain, members marked lost, lease extensions and
// write-out faults, one followed by a crash (checked by replayed).
var replayRuns = []struct {
	seed uint64
	run  int
}{{1, 4}, {1, 7}, {1, 11}, {1, 12}, {1, 20}, {1, 14}}

var replayOut = flag.String("sim.replay-out", "", "TestReplay_AnotherProcess's child: write the runs' traces here")

// replayed runs every replay run once, each alone in its bubble, keeping
// its file calls, and checks the runs cover what they must.
func replayed(t *testing.T) []Result {
	t.Helper()
	out := make([]Result, len(replayRuns))
	for i, rr := range replayRuns {
		synctest.Test(t, func(*testing.T) { out[i] = Run(rr.seed, rr.run, Options{keepTrace: true}) })
		if out[i].Violation != "" {
			t.Fatalf("seed %d run %d: %s", rr.seed, rr.run, out[i].Violation)
		}
	}
	all := ""
	for _, res := range out {
		all += strings.Join(res.Log, "\n")
	}
	for _, want := range []string{"crash: {", "restart", "delete t", "retention t", "drain t",
		"concurrent produce", "long poll of", "waiting consume", "cursor c", "disk floor",
		"move t", "drain member", " lost: ", "comes back", "extend t", "crash with the fault in force"} {
		if !strings.Contains(all, want) {
			t.Fatalf("no replay run has an operation %q", want)
		}
	}
	return out
}

// sameRun fails t where two executions of one run part: its operations,
// its file calls and crash images (the first call that differs shown).
func sameRun(t *testing.T, what string, seed uint64, run int, a, b Result) {
	t.Helper()
	if !slices.Equal(a.Log, b.Log) {
		t.Errorf("seed %d run %d %s: operations differ:\n%s", seed, run, what, firstDiff(a.Log, b.Log))
	}
	if a.Trace != b.Trace || a.Calls != b.Calls {
		t.Errorf("seed %d run %d %s: trace %016x of %d calls, then %016x of %d calls:\n%s",
			seed, run, what, a.Trace, a.Calls, b.Trace, b.Calls, firstDiff(a.Lines, b.Lines))
	}
}

// firstDiff shows where two lists of lines part, with a few lines before.
func firstDiff(a, b []string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	var s strings.Builder
	for j := max(i-5, 0); j < i; j++ {
		fmt.Fprintf(&s, "    %s\n", a[j])
	}
	if i < len(a) {
		fmt.Fprintf(&s, "  1st: %s\n", a[i])
	}
	if i < len(b) {
		fmt.Fprintf(&s, "  2nd: %s\n", b[i])
	}
	return s.String()
}

// A run replays exactly from (seed, run): the same operations, file calls
// and crash images, whether it runs alone or beside other runs.
func TestReplay_SameFileCallsEveryTime(t *testing.T) {
	first := replayed(t)
	again := replayed(t)
	for i, rr := range replayRuns {
		sameRun(t, "run again", rr.seed, rr.run, first[i], again[i])
	}
	// All at once, each beside the others, twice over.
	beside := make([]Result, 2*len(replayRuns))
	var wg sync.WaitGroup
	for i := range beside {
		rr := replayRuns[i%len(replayRuns)]
		wg.Go(func() {
			synctest.Test(t, func(*testing.T) { beside[i] = Run(rr.seed, rr.run, Options{keepTrace: true}) })
		})
	}
	wg.Wait()
	for i, res := range beside {
		rr := replayRuns[i%len(replayRuns)]
		sameRun(t, "run beside others", rr.seed, rr.run, first[i%len(replayRuns)], res)
	}
}

// A run replays exactly in another process too, one whose scheduler has a
// single processor: the child (this test, told by -sim.replay-out) writes
// each run's trace and call count, and they must be this process's.
func TestReplay_AnotherProcess(t *testing.T) {
	if *replayOut != "" {
		var b strings.Builder
		for i, res := range replayed(t) {
			fmt.Fprintf(&b, "%d %d %016x %d %d\n", replayRuns[i].seed, replayRuns[i].run, res.Trace, res.Calls, len(res.Log))
		}
		if err := os.WriteFile(*replayOut, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	here := replayed(t)
	out := filepath.Join(t.TempDir(), "traces")
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplay_AnotherProcess$", "-test.count=1", "-sim.replay-out="+out)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child: %v\n%s", err, msg)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	for sc := bufio.NewScanner(f); sc.Scan(); lines++ {
		res := here[lines]
		want := fmt.Sprintf("%d %d %016x %d %d", replayRuns[lines].seed, replayRuns[lines].run, res.Trace, res.Calls, len(res.Log))
		if sc.Text() != want {
			t.Errorf("the child traced %q, this process %q", sc.Text(), want)
		}
	}
	if lines != len(replayRuns) {
		t.Errorf("the child traced %d runs, want %d", lines, len(replayRuns))
	}
}
