package partition

import (
	"math/rand/v2"
	"testing"
)

// TestFrameCache_BudgetStaysExact: random puts, stopped puts, forgets
// and a close over two caches sharing a small budget; after every step
// each cache's bytes is the sum of its frames and large frame, and the
// budget's used is the sum of the caches' bytes.
func TestFrameCache_BudgetStaysExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		budget := NewCacheBudget(int64(rng.IntN(8 << 20)))
		caches := []*frameCache{{budget: budget}, {budget: budget}}
		for step := range 300 {
			c := caches[rng.IntN(2)]
			base := int64(rng.IntN(100))
			f := &cachedFrame{base: base, end: base + 1 + int64(rng.IntN(5)), bytes: 1 + rng.IntN(3<<20)}
			switch rng.IntN(6) {
			case 0, 1:
				c.put(f)
			case 2, 3:
				c.putStopped(f)
			case 4:
				c.forgetFrom(base)
			case 5:
				if rng.IntN(20) == 0 {
					c.close()
				} else {
					c.forgetBelow(base)
				}
			}
			total := int64(0)
			for _, c := range caches {
				sum := c.largeBytes()
				for _, f := range c.frames {
					sum += f.bytes
				}
				if sum != c.bytes {
					t.Fatalf("round %d step %d: bytes %d, frames and large hold %d", round, step, c.bytes, sum)
				}
				if c.closed && (c.large != nil || len(c.frames) > 0) {
					t.Fatalf("round %d step %d: a closed cache holds frames", round, step)
				}
				total += int64(c.bytes)
			}
			if budget.Used() != total {
				t.Fatalf("round %d step %d: budget used %d, caches hold %d", round, step, budget.Used(), total)
			}
		}
	}
}
