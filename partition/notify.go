package partition

import (
	"sync"
	"sync/atomic"
)

// notifier is a log's announcement that records may have become
// deliverable (docs/design.md, "Wake-ups for waiting readers"): a
// broadcast channel closed to wake every waiter at once, and a wake
// notifier function. A broadcast nobody fetched the channel for allocates
// nothing.
type notifier struct {
	mu     sync.Mutex
	ch     chan struct{} // nil until fetched since the last broadcast
	closed bool          // the log closed: C returns a closed channel
	wake   atomic.Pointer[func()]
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// C returns the channel the next broadcast closes.
func (n *notifier) C() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return closedChan
	}
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) broadcast() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
	if f := n.wake.Load(); f != nil {
		(*f)()
	}
}

// closeAll wakes every waiter for the last time: the log closed.
func (n *notifier) closeAll() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.broadcast()
}

func (n *notifier) setWakeNotifier(f func()) {
	if f == nil {
		n.wake.Store(nil)
		return
	}
	n.wake.Store(&f)
}
