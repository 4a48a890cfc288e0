package server

import (
	"strings"
	"testing"

	"github.com/narad-io/storage/scrub"
)

// TestScrubRateValidated: the scrubber is on at its default rate, off at
// 0, and a rate under scrub.MinRate (a pass that would take years) is
// refused with the flag's name.
func TestScrubRateValidated(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.ScrubRate != scrub.DefaultRate {
		t.Fatalf("default scrub rate %d, want %d", cfg.ScrubRate, scrub.DefaultRate)
	}
	for _, rate := range []int64{0, scrub.MinRate, scrub.DefaultRate} {
		cfg.ScrubRate = rate
		if err := cfg.Validate(); err != nil {
			t.Fatalf("rate %d: %v", rate, err)
		}
	}
	for _, rate := range []int64{1, scrub.MinRate - 1, -1} {
		cfg.ScrubRate = rate
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "scrub-rate") {
			t.Fatalf("rate %d: %v, want a scrub-rate error", rate, err)
		}
	}
}
