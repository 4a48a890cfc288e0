package partition

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/narad-io/storage/vfs/sim"
)

// TestProduce_RecordsAreNeverReadAfterProduceReturns: a caller may reuse
// its records' memory as soon as Produce returns, whatever ended it (the
// HTTP API gives a produce body's pooled buffer back then): a Produce
// whose context ends while its message waits in the mailbox behind a
// stalled actor, or while the mailbox is full, either commits its own
// bytes or leaves nothing behind; the records' memory, overwritten as
// soon as Produce returns, never reaches the log.
func TestProduce_RecordsAreNeverReadAfterProduceReturns(t *testing.T) {
	for _, fill := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			d := newDisk(t, 1)
			l := openLog(t, testOptions(d))
			defer closeLog(t, l)
			release := make(chan struct{})
			var stalling atomic.Bool
			stalling.Store(true)
			d.SetHook(func(c sim.Call) error {
				if c.Op == sim.OpSync && stalling.Load() {
					<-release
				}
				return nil
			})
			done := make(chan error, 1+mailboxSize)
			produce := func(ctx context.Context, recs []Record) { _, err := l.Produce(ctx, recs); done <- err }
			go produce(bg, records(1, 0, 1)) // the actor stalls in its fdatasync
			synctest.Wait()
			others := 1
			if fill {
				for i := range mailboxSize {
					go produce(bg, records(1, int64(1+i), 1))
				}
				others += mailboxSize
				synctest.Wait() // the mailbox is full
			}
			mine := records(1, 1000, 1)
			ctx, cancel := context.WithCancel(bg)
			mineDone := make(chan error, 1)
			go func() { _, err := l.Produce(ctx, mine); mineDone <- err }()
			synctest.Wait() // in the mailbox, or waiting for room in it
			cancel()
			synctest.Wait()
			poison := func() {
				for _, r := range mine {
					for i := range r.Value {
						r.Value[i] = 0xA5
					}
					for i := range r.Key {
						r.Key[i] = 0xA5
					}
				}
			}
			var mineErr error
			returned := false
			select {
			case mineErr = <-mineDone: // returned while the actor is stalled: reuse the memory now
				returned = true
				poison()
			default:
			}
			stalling.Store(false)
			close(release)
			if !returned {
				mineErr = <-mineDone
				poison()
			}
			for range others {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if fill && !errors.Is(mineErr, context.Canceled) {
				t.Fatalf("a Produce waiting for room in a full mailbox, its context cancelled: %v", mineErr)
			}
			recs, _ := readAll(t, l)
			found := false
			for _, r := range recs {
				found = found || checkRecord(t, 1, r) == 1000
			}
			if found != (mineErr == nil) || len(recs) != others+btoi(found) {
				t.Fatalf("fill %v: Produce said %v, its record committed: %v, %d records of %d", fill, mineErr, found, len(recs), others+btoi(found))
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
