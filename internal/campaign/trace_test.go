package campaign

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/vfs/sim"
)

// TestWorkload_IsDeterministic: two runs of the reference workload make
// the same mutating calls in the same order, so a state named by (seed,
// variant, call index, mode) replays exactly.
func TestWorkload_IsDeterministic(t *testing.T) {
	warmZstd(t)
	for _, v := range Variants {
		var traces [2][]string
		for run := range traces {
			bubble(t)(func() {
				d, err := newDisk(1)
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				d.SetHook(func(c sim.Call) error {
					mu.Lock()
					defer mu.Unlock()
					if crashtest.Mutating(c) {
						traces[run] = append(traces[run], fmt.Sprintf("%s %s %s %d %d", c.Op, c.Path, c.Path2, c.Off, c.Len))
					}
					return nil
				})
				if err := Run(context.Background(), d, v, 1, &Model{}, func(f func()) { f() }, Options{}); err != nil {
					t.Error(err)
				}
			})
		}
		for i := range min(len(traces[0]), len(traces[1])) {
			if traces[0][i] != traces[1][i] {
				t.Logf("first difference at call %d: %q vs %q; before: %q", i, traces[0][i], traces[1][i], traces[0][max(0, i-8):min(len(traces[0]), i+8)])
				t.Logf("other: %q", traces[1][max(0, i-8):min(len(traces[1]), i+8)])
				break
			}
		}
		if len(traces[0]) < 500 || !slices.Equal(traces[0], traces[1]) {
			t.Errorf("%s: runs made %d and %d mutating calls, not the same ones", v, len(traces[0]), len(traces[1]))
		}
	}
}
