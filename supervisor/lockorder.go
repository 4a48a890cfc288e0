package supervisor

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
)

// Lock levels, in the order they must be taken (docs/architecture.md): a
// goroutine holding a lock may take only locks of a higher level, and at
// most one of each level.
const (
	levelProduceGate = 1
	levelTopicGuard  = 2
	levelMapLock     = 3
)

var levelNames = map[int]string{
	levelProduceGate: "produce gate",
	levelTopicGuard:  "topic guard",
	levelMapLock:     "map lock",
}

// lockOrder checks, per goroutine, that locks are taken in level order.
// It is off in production (a nil *lockOrder checks nothing) and on in
// tests (RegistryOptions.CheckLockOrder), where a violation is recorded
// and reported by Violations, and the registry's owner fails the test.
type lockOrder struct {
	mu         sync.Mutex
	held       map[uint64][]int // goroutine -> levels held, in order taken
	violations []string
}

func newLockOrder() *lockOrder { return &lockOrder{held: map[uint64][]int{}} }

func (o *lockOrder) acquire(level int, what string) {
	if o == nil {
		return
	}
	g := goroutineID()
	o.mu.Lock()
	defer o.mu.Unlock()
	held := o.held[g]
	if n := len(held); n > 0 && held[n-1] >= level {
		o.violations = append(o.violations, fmt.Sprintf("goroutine %d takes the %s (%s) while holding the %s", g, levelNames[level], what, levelNames[held[n-1]]))
	}
	o.held[g] = append(held, level)
}

// tryAcquired records a lock taken by a try, which never waits and so
// needs no order: it is held like any other until released.
func (o *lockOrder) tryAcquired(level int) {
	if o == nil {
		return
	}
	g := goroutineID()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.held[g] = append(o.held[g], level)
}

func (o *lockOrder) release(level int) {
	if o == nil {
		return
	}
	g := goroutineID()
	o.mu.Lock()
	defer o.mu.Unlock()
	held := o.held[g]
	for i := len(held) - 1; i >= 0; i-- {
		if held[i] == level {
			held = append(held[:i], held[i+1:]...)
			break
		}
	}
	if len(held) == 0 {
		delete(o.held, g)
	} else {
		o.held[g] = held
	}
}

// Violations lists every out-of-order acquisition seen so far.
func (o *lockOrder) Violations() []string {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.violations...)
}

// goroutineID parses the current goroutine's id from its stack header.
// Only the lock-order checker, which tests turn on, pays for it.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
