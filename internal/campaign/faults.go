package campaign

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// A failure is one way a call fails (docs/durability.md rows 17 to 23, 26, 30
// to 32).
type failure struct {
	name   string
	err    error         // the call fails with it
	lie    bool          // a sync reports success and persists nothing
	short  bool          // a write stores half its bytes and fails
	sticky bool          // err fails this call and every mutating call after it
	delay  time.Duration // the call takes this long (fake time), then succeeds
}

// readOnly is row 31: the file system turns read-only after a journal
// error, failing every change from then on.
var readOnly = failure{name: "EROFS from here on", err: syscall.EROFS, sticky: true}

// failuresOf are the ways a call can fail; prev is the mutating call
// before it.
func failuresOf(c, prev sim.Call) []failure {
	eio := failure{name: "EIO", err: syscall.EIO}
	enospc := failure{name: "ENOSPC", err: syscall.ENOSPC}
	switch c.Op {
	case sim.OpWrite:
		return []failure{enospc, eio, {name: "short write", short: true}, readOnly}
	case sim.OpSync:
		ways := []failure{eio, {name: "lie", lie: true}, enospc}
		if path.Ext(c.Path) == wire.SegmentFileSuffix && prev.Op == sim.OpWrite && prev.Path == c.Path {
			// Only a commit's or a roll's, right after a frame write: a
			// synctest bubble's clock stands still while anything waits
			// on a mutex, and recovery and the consumer's write-outs
			// hold one across their fsyncs, so a slow one there would
			// stop the run, not slow it.
			ways = append(ways, failure{name: "slow (5 s)", delay: 5 * time.Second})
		}
		return ways
	case sim.OpSyncDir:
		return []failure{eio, {name: "lie", lie: true}}
	case sim.OpOpen:
		return []failure{eio, enospc, {name: "EMFILE", err: syscall.EMFILE}, readOnly}
	case sim.OpMkdir:
		return []failure{eio, enospc}
	}
	return []failure{eio, readOnly} // truncate, remove, rename
}

// faultWindow is how many mutating calls after a failed one are each
// crashed in every mode (rows 21 and 28: a crash while the failure is
// being handled).
const faultWindow = 2

// commitsAfterFault is how many commits a run makes after its failure.
const commitsAfterFault = 5

// Faults fails every mutating call of the reference workload in turn, in
// every way that call can fail, and lets the workload go on as a broker
// would (Run with retry: a failed commit is committed again and must land
// at the same offsets, a poisoned log is reopened by a restart). Each run
// must finish; a process restart after it must serve every record whose
// commit returned (a lie loses nothing without a power loss); and the
// crash states just after the failure and at the end are checked like
// any crash state, with a lie's commit and everything after it no longer
// promised (I4 honest commits only). every thins the runs to one call in
// every; a run goes on for commitsAfterFault commits past its failure.
//
// With all false, each call fails in one of its ways, taken in turn from
// call to call (every call still fails once); with all, in each of them.
func Faults(ctx context.Context, bubble Bubble, seed uint64, every int, all bool, seen *stateSet) Report {
	var r Report
	for _, v := range Variants {
		label := fmt.Sprintf("seed %d, %s", seed, v)
		calls, err := callsOf(ctx, bubble, v, seed)
		if err != nil {
			r.Violations = append(r.Violations, fmt.Sprintf("%s: the workload failed with nothing injected: %v", label, err))
			continue
		}
		c := startCheckers(func(check func() error) error { return check() })
		for k := 1; k <= len(calls); k += every {
			var prev sim.Call
			if k > 1 {
				prev = calls[k-2]
			}
			ways := failuresOf(calls[k-1], prev)
			if !all {
				ways = ways[k%len(ways) : k%len(ways)+1]
			}
			for _, f := range ways {
				at := fmt.Sprintf("%s, %s at call %d (%s %s)", label, f.name, k, calls[k-1].Op, calls[k-1].Path)
				fired, states, err := faultRun(ctx, bubble, v, seed, k, f, seen, func(check func() error) {
					c.states <- func() error {
						if err := check(); err != nil {
							return fmt.Errorf("%s: %w", at, err)
						}
						return nil
					}
				})
				r.CrashStates += states
				switch {
				case !fired:
					r.Violations = append(r.Violations, fmt.Sprintf("%s: the call never came (the workload is not deterministic)", at))
				case err != nil:
					r.Violations = append(r.Violations, fmt.Sprintf("%s: the workload could not go on: %v", at, err))
				default:
					r.Injected++
				}
			}
		}
		r.Violations = append(r.Violations, c.wait()...)
	}
	return r
}

// callsOf records the mutating calls of a clean run.
func callsOf(ctx context.Context, bubble Bubble, v Variant, seed uint64) ([]sim.Call, error) {
	var calls []sim.Call
	var runErr error
	bubble(func() {
		d, err := newDisk(seed)
		if err != nil {
			runErr = err
			return
		}
		var mu sync.Mutex
		d.SetHook(func(c sim.Call) error {
			if crashtest.Mutating(c) {
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
			}
			return nil
		})
		runErr = Run(ctx, d, v, seed, &Model{}, func(f func()) { f() }, Options{})
	})
	return calls, runErr
}

// faultRun runs the workload with call k failing as f says, sending the
// checks of its states to check: each new crash state in the window after
// the failure and at the end, and a process restart at the end. It
// reports whether the failure fired, how many new crash states it sent,
// and the workload's error.
func faultRun(ctx context.Context, bubble Bubble, v Variant, seed uint64, k int, f failure, seen *stateSet,
	check func(func() error)) (fired bool, states int, runErr error) {
	var hit atomic.Bool // set by whichever goroutine made call k
	bubble(func() {
		w, err := newRun(seed)
		if err != nil {
			runErr = err
			return
		}
		d, m := w.d, &w.m
		explore := w.explorer()
		explore.Take = func(call int) bool { return call > k && call <= k+faultWindow }
		explore.Emit = func(img crashtest.Image[Model]) {
			if !seen.add(img.Hash) {
				return
			}
			states++
			check(func() error { return CheckCrashState(ctx, img, seed) })
		}
		explore.Fail = func(call int, c sim.Call) error {
			if f.sticky && call > k {
				return f.err
			}
			if call != k {
				return nil
			}
			hit.Store(true)
			switch {
			case f.delay > 0:
				time.Sleep(f.delay)
			case f.lie:
				w.lock(func() { m.noteLie(c) })
				d.Inject(sim.Fault{Op: c.Op, Path: c.Path, Nth: 1, Lie: true})
			case f.short:
				d.Inject(sim.Fault{Op: sim.OpWrite, Path: c.Path, Nth: 1, Short: max(c.Len/2, 1), Err: io.ErrShortWrite})
			default:
				return f.err
			}
			return nil
		}
		// The run goes on for a few commits past the failure: enough for
		// its handling, a retry and a crash after them to be explored; a
		// process restart at the end is the reopen.
		after := 0
		stop := func() bool {
			if hit.Load() {
				after++
			}
			return after > commitsAfterFault
		}
		explore.Run(func() { runErr = w.workload(ctx, v, seed, Options{Retry: true, Stop: stop}) })
		if f.sticky && errors.Is(runErr, syscall.EROFS) && !errors.Is(runErr, errLockOrder) {
			runErr = nil // nothing can go on on a read-only file system; the restart below lifts it
		}
		if runErr != nil {
			return
		}
		// No power loss: everything whose commit returned is there, a
		// lie's included.
		restarted, promised := d.ProcessCrash(), w.snapshot()
		promised.LiedMeta, promised.LiedMetastore, promised.LiedMetastoreCopy = false, false, false
		promised.LiedMarker, promised.LiedMarkerCopy = false, false
		for i := range promised.Gens {
			promised.Gens[i].Lied, promised.Gens[i].Honest = false, promised.Gens[i].Committed
		}
		check(func() error {
			if err := checkDisk(ctx, restarted, promised, seed, true); err != nil {
				return fmt.Errorf("a process restart after the run: %w", err)
			}
			return nil
		})
	})
	return hit.Load(), states, runErr
}
