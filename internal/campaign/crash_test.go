package campaign

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/internal/crashtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCampaign_EveryCrashStateOfTheReferenceWorkload explores every crash
// state of the reference workload, codec none and zstd, and checks each
// on a fresh node (CheckCrashState). Any violation fails the test with
// the state's label: seed, codec, call index and crash mode.
func TestCampaign_EveryCrashStateOfTheReferenceWorkload(t *testing.T) {
	const seed = 1
	// The zstd codec's shared encoder and decoder are made on first use:
	// made inside a synctest bubble, their channels would belong to it.
	warm, _ := codec.ByID(codec.Zstd)
	encoded, err := warm.Encode(nil, []byte("warm up"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Decode(nil, encoded, len("warm up")); err != nil {
		t.Fatal(err)
	}
	total, calls := 0, 0
	for _, c := range []codec.ID{codec.None, codec.Zstd} {
		var images []crashtest.Image[Model]
		synctest.Test(t, func(t *testing.T) {
			var err error
			var n int
			images, n, err = CrashStates(context.Background(), c, seed)
			if err != nil {
				t.Fatalf("codec %s: the workload failed: %v", c, err)
			}
			calls += n
		})
		for _, img := range images {
			if err := CheckCrashState(context.Background(), img, c, seed); err != nil {
				t.Fatalf("seed %d, codec %s: %v", seed, c, err)
			}
		}
		total += len(images)
	}
	t.Logf("campaign: crash states explored: %d (from %d mutating calls), violations: 0", total, calls)
}
