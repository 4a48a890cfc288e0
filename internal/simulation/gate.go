package simulation

import (
	"cmp"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing/synctest"

	nodert "github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
)

// gate orders the file calls of an operation that has callers parked in
// the node (long polls, waiting consumes, concurrent producers) while
// something wakes them. A woken caller runs beside the node goroutine that
// woke it: a long poll a commit's broadcast woke reads its records while
// the log's actor goes on to roll the segment, and which of them reaches
// the disk first would be the scheduler's choice. While the gate is open,
// every file call of the node's own goroutines (the logs' actors, the
// committer, the reaper) waits at it, and the workload lets them through
// one at a time, each with the bubble at rest: every caller woken has run
// until it parked again, or returned. The workload's goroutine and the
// callers it started (goSettled) are not held: a woken caller's calls
// come between two of the node's, always the same two.
//
// The gate tells the workload's goroutines from the node's by their
// stacks (fromWorkload); a caller is never held, so nothing the gate holds
// owns a lock a caller waits for. The workload's goroutine never calls the
// node while the gate holds one of its calls (it would wait for itself):
// it calls through the gate (retry), which lets the held calls through
// meanwhile.
//
// Invariants, under mu: held lists the calls waiting at the gate, each
// released (its go channel closed) exactly once, by pass, retry or close.
type gate struct {
	d       *sim.Disk
	prev    func(sim.Call) error
	mu      sync.Mutex
	held    []*heldCall
	arrived chan struct{} // a call came to the gate (one signal kept)
	closed  bool
}

// heldCall is one file call waiting at the gate.
type heldCall struct {
	c    sim.Call
	pass chan struct{}
}

// openGate opens a gate on the run's disk, in front of the hooks already
// installed (the trace: a held call is traced when it passes).
func (r *runner) openGate() *gate {
	g := &gate{d: r.d, prev: r.d.Hook(), arrived: make(chan struct{}, 1)}
	r.d.SetHook(g.hook)
	return g
}

func (g *gate) hook(c sim.Call) error {
	if !fromWorkload() {
		h := &heldCall{c: c, pass: make(chan struct{})}
		g.mu.Lock()
		closed := g.closed
		if !closed {
			g.held = append(g.held, h)
		}
		g.mu.Unlock()
		if !closed {
			select {
			case g.arrived <- struct{}{}:
			default:
			}
			<-h.pass
		}
	}
	if g.prev != nil {
		return g.prev(c)
	}
	return nil
}

// next takes the held call to let through: the least by path, operation,
// offset and length, an order of the calls' own, never of their arrival.
func (g *gate) next() *heldCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) == 0 {
		return nil
	}
	i := 0
	for j, h := range g.held {
		if compareCalls(h.c, g.held[i].c) < 0 {
			i = j
		}
	}
	h := g.held[i]
	g.held = slices.Delete(g.held, i, i+1)
	return h
}

func compareCalls(a, b sim.Call) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(string(a.Op), string(b.Op)),
		cmp.Compare(a.Off, b.Off), cmp.Compare(a.Len, b.Len), strings.Compare(a.Path2, b.Path2), cmp.Compare(a.Flag, b.Flag))
}

// holds reports whether a call under dir (a path prefix) waits at the gate.
func (g *gate) holds(dir string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.ContainsFunc(g.held, func(h *heldCall) bool { return strings.HasPrefix(h.c.Path, dir) })
}

// pass lets the held calls through one at a time, the bubble at rest
// before each, until it is at rest with none held.
func (g *gate) pass() {
	for {
		synctest.Wait()
		h := g.next()
		if h == nil {
			return
		}
		close(h.pass)
	}
}

// retry runs call, a call into the node, in a caller goroutine, letting
// the held calls through meanwhile as pass does, and again while it
// answers busy (as retryBusy). call must not touch the model: it runs
// beside the workload.
func (g *gate) retry(call func() error) error {
	for try := 0; ; try++ {
		var err error
		done := make(chan struct{})
		go callerFrame(func() {
			defer close(done)
			err = call()
		})
		for !answered(done) {
			synctest.Wait()
			if h := g.next(); h != nil {
				close(h.pass)
				continue
			}
			select { // parked on something else than the gate: a timer, say
			case <-done:
			case <-g.arrived:
			}
		}
		g.pass()
		if !errors.Is(err, nodert.ErrBusy) || try == 100 {
			return err
		}
	}
}

// close lets everything held through, in order, and takes the gate away.
// After a violation (the run stops) it lets them through at once.
func (g *gate) close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	held := g.held
	g.held = nil
	g.mu.Unlock()
	slices.SortFunc(held, func(a, b *heldCall) int { return compareCalls(a.c, b.c) })
	for _, h := range held {
		close(h.pass)
	}
	g.d.SetHook(g.prev)
}

// callerFrame runs f: a goroutine started through it is one of the
// workload's callers (fromWorkload finds it on the stack).
//
//go:noinline
func callerFrame(f func()) { f() }

// The functions fromWorkload looks for, by name.
var runFunc, callerFunc string

func init() { runFunc, callerFunc = funcName(Run), funcName(callerFrame) }

func funcName(f any) string {
	return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
}

// fromWorkload reports whether the calling goroutine is the workload's
// (Run is on its stack) or a caller it started (callerFrame is).
func fromWorkload() bool {
	var pcs [512]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function == runFunc || f.Function == callerFunc {
			return true
		}
		if !more {
			return false
		}
	}
}
