package partition

import (
	"bytes"
	"math/rand/v2"
	goruntime "runtime"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestFrameCache_BudgetStaysExact: random puts, stopped puts, forgets
// and a close over two caches sharing a small budget; after every step
// each cache's bytes is the sum of its frames and large frame, no frame
// is both, and the budget's used is the sum of the caches' bytes.
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
					if c.large != nil && f.base == c.large.base {
						t.Fatalf("round %d step %d: the frame at %d is both among the frames and the large frame", round, step, f.base)
					}
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

// TestFrameCache_KeepsTheBufferOfABatchItCaches: a large batch's frame is
// written from a pooled buffer, and a tail reader's cache keeps its
// records in place: that buffer must not go back to the pool, where the
// next batch would be laid out over the cached records, and the cache
// counts the whole buffer and the frame's records.
func TestFrameCache_KeepsTheBufferOfABatchItCaches(t *testing.T) {
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(1)) // one P: a buffer put back is the next get's
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d, CacheBudget: NewCacheBudget(64 << 20)})
	defer closeLog(t, l)
	if _, err := l.Read(0, 1, 1); err != nil { // a tail reader: the next frame written is cached
		t.Fatal(err)
	}
	if _, err := l.Produce(bg, bigRecords(0, 30, 4096)); err != nil { // ~120 KiB: a pooled batch
		t.Fatal(err)
	}
	if _, err := l.Produce(bg, bigRecords(30, 30, 4096)); err != nil { // the same size class
		t.Fatal(err)
	}
	l.cache.mu.Lock()
	charged := l.cache.bytes
	l.cache.mu.Unlock()
	if want := 128<<10 + 30*int(unsafe.Sizeof(ReadRecord{})); charged != want { // the pooled buffer the records lie in, not the frame's ~123 KiB
		t.Fatalf("the cached frame is counted at %d bytes, want its buffer's and records' %d", charged, want)
	}
	hits := testutil.ToFloat64(l.metrics.frameCacheHits)
	res, err := l.Read(0, 30, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(l.metrics.frameCacheHits) - hits; got != 1 {
		t.Fatalf("%v cache hits reading the cached frame, want 1", got)
	}
	for i, r := range res.Records {
		if !bytes.Equal(r.Value, bigValue(int64(i), 4096)) {
			t.Fatalf("cached record %d holds other bytes", i)
		}
	}
}
