package scrub

import (
	"context"
	"sync"
	"time"
)

// pacerStep is the most bytes one wait pays for: a read larger than it
// waits in steps, beating after each.
const pacerStep = 64 << 10

// beatEvery is the longest a wait goes without beating: a step's wait at
// a slow rate (328 s for 64 KiB at 200 B/s) is made in slices of it, so
// the loop's watchdog never takes a pass at any positive rate for
// stalled.
const beatEvery = time.Second

// pacer holds reads to rate bytes per second: a read of n bytes first
// waits until the bytes read before it, and its own, have been earned.
//
// Invariants:
//   - rate > 0 and never changes.
//   - mu guards next, the instant by which everything paid so far is
//     earned; it never lies in the past at the end of a wait's step
//     (idle time earns no burst), so at any instant t the bytes read
//     since the pacer's first step are at most rate*(t - first step) plus
//     one step.
type pacer struct {
	rate int64

	mu   sync.Mutex
	next time.Time
}

func newPacer(rate int64) *pacer { return &pacer{rate: rate} }

// wait pays for n bytes, in steps of at most pacerStep, calling beat after
// each and at least every beatEvery while it waits; it returns ctx's error
// as soon as ctx ends.
func (p *pacer) wait(ctx context.Context, n int, beat func()) error {
	for n > 0 {
		step := min(n, pacerStep)
		n -= step
		p.mu.Lock()
		now := time.Now()
		if p.next.Before(now) {
			p.next = now
		}
		p.next = p.next.Add(time.Duration(int64(step) * int64(time.Second) / p.rate))
		d := p.next.Sub(now)
		p.mu.Unlock()
		for d > 0 {
			slice := min(d, beatEvery)
			t := time.NewTimer(slice)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			if d -= slice; d > 0 && beat != nil {
				beat()
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if beat != nil {
			beat()
		}
	}
	return nil
}
