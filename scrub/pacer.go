package scrub

import (
	"context"
	"sync"
	"time"
)

// pacerStep is the most bytes one wait pays for: a read larger than it
// waits in steps, beating after each, so a slow rate never leaves the
// loop's watchdog without a tick for longer than pacerStep/rate.
const pacerStep = 64 << 10

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
// each; it returns ctx's error as soon as ctx ends.
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
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		if beat != nil {
			beat()
		}
	}
	return nil
}
