package campaign

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/narad-io/storage/codec"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// warmZstd makes the zstd codec's shared encoder and decoder outside any
// synctest bubble: made inside one, their channels would belong to it.
func warmZstd(t *testing.T) {
	warm, _ := codec.ByID(codec.Zstd)
	encoded, err := warm.Encode(nil, []byte("warm up"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Decode(nil, encoded, len("warm up")); err != nil {
		t.Fatal(err)
	}
}

func bubble(t *testing.T) Bubble {
	return func(f func()) { synctest.Test(t, func(*testing.T) { f() }) }
}

// TestCampaign runs the crash and fault campaign's CI budget (CI): every
// crash state of the reference workload at three seeds, every sector of
// its files damaged, every mutating call failed once; each violation
// fails the test naming its state. Its last line of output is the
// campaign's summary. Under the race detector it runs a thinned budget
// (the full one runs in CI's campaign step, without it).
func TestCampaign(t *testing.T) {
	warmZstd(t)
	budget := CI
	if raceDetector {
		budget = Budget{Seeds: []uint64{1}, CrashEvery: 40, DamageEvery: 20, FaultEvery: 40}
	}
	r := budget.Run(context.Background(), bubble(t))
	for _, v := range r.Violations {
		t.Error(v)
	}
	if r.CrashStates == 0 || r.Damaged == 0 || r.Injected == 0 {
		t.Errorf("the campaign explored nothing of a part: %v", r)
	}
	t.Logf("damaged states in the fault model's one excluded case (row 7): %d", r.Excluded)
	fmt.Println(r)
}

var (
	longSeed   = flag.Uint64("campaign.seed", 1, "the long campaign's seed")
	longStates = flag.Int("campaign.states", 2000, "how many randomized states the long campaign checks at least")
	longRun    = flag.Int("campaign.run", -1, "replay this run of the long campaign alone (a violation names its seed and run)")
)

// TestCampaignLong runs the long campaign (Long): randomized crash states
// with lying fsyncs and single damaged blocks, 2,000 states by default
// (200 under the race detector). A nightly run asks for more with any
// seed, and a violation replays from its seed and run:
//
//	go test ./internal/campaign -run '^TestCampaignLong$' -timeout 0 -v \
//	    -campaign.seed=7 -campaign.states=1000000
//	go test ./internal/campaign -run '^TestCampaignLong$' -v -campaign.seed=7 -campaign.run=1234
func TestCampaignLong(t *testing.T) {
	warmZstd(t)
	ctx := context.Background()
	if *longRun >= 0 {
		r := LongRun(ctx, bubble(t), *longSeed, *longRun, newStateSet())
		for _, v := range r.Violations {
			t.Error(v)
		}
		t.Logf("seed %d run %d: %v", *longSeed, *longRun, r)
		return
	}
	states := *longStates
	if raceDetector && states == 2000 {
		states = 200
	}
	r := Long(ctx, bubble(t), *longSeed, 0, states, func(run int, r Report) {
		for _, v := range r.Violations {
			t.Error(v) // as found: a long run's violations must not wait for its end
		}
		if run%100 == 99 {
			t.Logf("seed %d, run %d done", *longSeed, run)
		}
	})
	if r.CrashStates+r.Damaged < states {
		t.Errorf("checked %d states, asked for %d", r.CrashStates+r.Damaged, states)
	}
	t.Logf("long campaign, seed %d: crash states explored: %d, damaged states: %d, lying fsyncs: %d, violations: %d",
		*longSeed, r.CrashStates, r.Damaged, r.Injected, len(r.Violations))
}
