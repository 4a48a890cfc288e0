package supervisor

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/partition"
)

// ErrRegistryClosed: the registry was closed (its node is shutting down);
// nothing opens any more.
var ErrRegistryClosed = errors.New("supervisor: registry closed")

// Key names one partition.
type Key struct {
	Topic     string
	Partition int
}

// RegistryOptions configure a Registry.
type RegistryOptions struct {
	// CheckLockOrder turns on the lock-order checker: every out-of-order
	// acquisition is recorded and listed by LockOrderViolations. Tests
	// turn it on; it costs a stack read per lock.
	CheckLockOrder bool
	// OnClose, if set, runs after a log is closed, under its topic's
	// guard, with the closed log: state kept beside the log (consumer
	// progress) is settled and its files closed with it.
	OnClose func(Key, *partition.Log)
	// MaxOpen bounds the logs open at once (the node's budget of open
	// logs, and so of their descriptors and caches); 0 is no bound. An
	// open past it first closes the least recently used idle log, and
	// fails with ErrNoRoom if every open log is in use. The open function
	// given to Open takes its slot with GuardedTopic.Reserve, once it knows
	// the open is valid and right before it makes the log. A log found in
	// use by that choice counts as used then.
	MaxOpen int
	// OnEvict, if set, runs after a log was closed to make room within
	// MaxOpen, with its close error.
	OnEvict func(Key, error)
	// Evictable, if set, says whether an idle log may be closed to make
	// room (a log retention still works on, with nothing to sweep it
	// closed, may not).
	Evictable func(Key, *partition.Log) bool
	// OnOpen, if set, runs after a log was opened and installed, under
	// its topic's guard.
	OnOpen func(Key, *partition.Log)
}

// Registry is a node's map of open partition logs (the design's
// runtime.Logs). It keeps the design's lock order:
//
//	partition produce gate  ->  topic guard  ->  map lock
//
// The map lock is held only to look up, claim, install or drop an entry;
// opens, closes, metastore lookups, incarnation checks and purges run under
// the per-topic guard, so one topic's I/O never stalls another topic.
//
// Invariants:
//   - mu (the map lock) guards gates, guards, logs and their order of
//     last use (lru, recency.go); nothing else is ever taken while it is
//     held.
//   - A log is in logs only between a successful open under its topic's
//     guard and the drop, under the same guard, that precedes its close.
//   - Gates and guards are never removed: a caller holding one never finds
//     it replaced.
//   - Once closed is set (under mu), no log is ever installed again: an
//     open that raced Close closes the log it made instead, so every log
//     installed is one that Close's listing (Keys, after Close) sees.
//   - A log closed behind the registry's back (by a caller of a log it
//     handed out) is never handed out again: Open finds it closed, drops
//     and settles its entry under the topic's guard, and opens afresh.
//   - With a budget (MaxOpen > 0), len(logs) + opening + closing <=
//     maxOpen: an open reserves its slot under mu, under its topic's
//     guard, right before it makes the log (GuardedTopic.Reserve,
//     budget.go), and turns it into its entry under mu, or gives it back;
//     a dropped log holds its slot until its close is done.
type Registry struct {
	order     *lockOrder
	onClose   func(Key, *partition.Log)
	onEvict   func(Key, error)
	onOpen    func(Key, *partition.Log)
	evictable func(Key, *partition.Log) bool
	maxOpen   int
	evictions atomic.Uint64

	mu      sync.Mutex
	closed  bool
	gates   map[Key]*Gate
	guards  map[string]*TopicGuard
	logs    map[Key]*entry
	lru     recency // the entries of logs, least recently used first
	opening int     // slots reserved by opens under way
	closing int     // slots held by dropped logs whose close is under way
}

type entry struct {
	log *partition.Log
	key Key
	// Under the map lock, kept by recency (recency.go): the stamp of the
	// last Open that returned the log (or of the budget finding it in
	// use), and its neighbours in the order of last use.
	lastUsed   int64
	prev, next *entry
}

// NewRegistry returns an empty registry.
func NewRegistry(opts RegistryOptions) *Registry {
	r := &Registry{gates: map[Key]*Gate{}, guards: map[string]*TopicGuard{}, logs: map[Key]*entry{}, lru: newRecency(),
		onClose: opts.OnClose, onEvict: opts.OnEvict, onOpen: opts.OnOpen, evictable: opts.Evictable, maxOpen: opts.MaxOpen}
	if opts.CheckLockOrder {
		r.order = newLockOrder()
	}
	return r
}

// LockOrderViolations lists the out-of-order acquisitions seen, when the
// checker is on.
func (r *Registry) LockOrderViolations() []string { return r.order.Violations() }

func (r *Registry) lockMap() {
	r.order.acquire(levelMapLock, "")
	r.mu.Lock()
}

func (r *Registry) unlockMap() {
	r.mu.Unlock()
	r.order.release(levelMapLock)
}

// Gate is a partition's produce gate: Produce calls hold it shared, so
// they can be coalesced; the Append+CommitDurable pair and every close of a
// live log hold it exclusive, so a close lands between two commits.
type Gate struct {
	rw    sync.RWMutex
	order *lockOrder
	key   Key
}

func (g *Gate) LockShared()   { g.order.acquire(levelProduceGate, g.key.Topic); g.rw.RLock() }
func (g *Gate) UnlockShared() { g.rw.RUnlock(); g.order.release(levelProduceGate) }
func (g *Gate) Lock()         { g.order.acquire(levelProduceGate, g.key.Topic); g.rw.Lock() }
func (g *Gate) Unlock()       { g.rw.Unlock(); g.order.release(levelProduceGate) }

// tryLock takes the gate exclusive if it is free. A try never waits, so
// it cannot deadlock whatever the caller holds: the checker records it as
// held without checking its order.
func (g *Gate) tryLock() bool {
	if !g.rw.TryLock() {
		return false
	}
	g.order.tryAcquired(levelProduceGate)
	return true
}

// TopicGuard serializes the I/O of one topic's log lifecycle: opens,
// closes, incarnation checks, purges.
type TopicGuard struct {
	mu    sync.Mutex
	order *lockOrder
	topic string
}

func (g *TopicGuard) Lock()   { g.order.acquire(levelTopicGuard, g.topic); g.mu.Lock() }
func (g *TopicGuard) Unlock() { g.mu.Unlock(); g.order.release(levelTopicGuard) }

// tryLock takes the guard if it is free, without waiting (Gate.tryLock).
func (g *TopicGuard) tryLock() bool {
	if !g.mu.TryLock() {
		return false
	}
	g.order.tryAcquired(levelTopicGuard)
	return true
}

// Gate returns the produce gate of key, creating it on first use.
func (r *Registry) Gate(key Key) *Gate {
	r.lockMap()
	defer r.unlockMap()
	g := r.gates[key]
	if g == nil {
		g = &Gate{order: r.order, key: key}
		r.gates[key] = g
	}
	return g
}

// Guard returns the guard of topic, creating it on first use.
func (r *Registry) Guard(topic string) *TopicGuard {
	r.lockMap()
	defer r.unlockMap()
	g := r.guards[topic]
	if g == nil {
		g = &TopicGuard{order: r.order, topic: topic}
		r.guards[topic] = g
	}
	return g
}

// Lookup returns key's open log, if any, without opening it.
func (r *Registry) Lookup(key Key) (*partition.Log, bool) {
	r.lockMap()
	defer r.unlockMap()
	if e := r.logs[key]; e != nil {
		return e.log, true
	}
	return nil, false
}

// Open returns key's open log, opening it with open under the topic guard
// when it is not open yet (lazy open on first use). open gets the guarded
// topic, so an incarnation check can retire the topic's other logs, and,
// with a budget, must take the log's slot with its Reserve (which may
// close the least recently used idle log, or fail with ErrNoRoom) before
// it makes the log. The caller may hold key's gate; it must hold no guard
// and not the map lock. After Close it answers ErrRegistryClosed.
func (r *Registry) Open(key Key, open func(t *GuardedTopic) (*partition.Log, error)) (*partition.Log, error) {
	if l, ok := r.lookupTouch(key); ok && !l.Closed() {
		return l, nil
	}
	g := r.Guard(key.Topic)
	g.Lock()
	defer g.Unlock()
	if l, ok := r.lookupTouch(key); ok {
		if !l.Closed() {
			return l, nil
		}
		// Closed behind the registry's back: settle the entry the way
		// every close does, then open afresh.
		_ = r.dropAndClose(key)
	}
	if r.isClosed() {
		return nil, fmt.Errorf("%w: open %s/%d", ErrRegistryClosed, key.Topic, key.Partition)
	}
	t := &GuardedTopic{r: r, topic: key.Topic, opening: key}
	defer t.unreserve()
	l, err := open(t)
	if err != nil {
		return nil, err
	}
	if r.maxOpen > 0 && !t.reserved {
		return nil, errors.Join(fmt.Errorf("supervisor: open %s/%d made a log without reserving its slot", key.Topic, key.Partition), l.Close())
	}
	r.lockMap()
	if r.closed {
		r.unlockMap()
		// Close listed the open logs before this one existed: it is
		// this opener's to close.
		return nil, errors.Join(fmt.Errorf("%w: open %s/%d", ErrRegistryClosed, key.Topic, key.Partition), l.Close())
	}
	e := &entry{log: l, key: key}
	r.logs[key] = e
	r.lru.pushBack(e)
	if t.reserved {
		r.opening--
		t.reserved = false
	}
	r.unlockMap()
	if r.onOpen != nil {
		r.onOpen(key, l)
	}
	return l, nil
}

func (r *Registry) lookupTouch(key Key) (*partition.Log, bool) {
	r.lockMap()
	defer r.unlockMap()
	if e := r.logs[key]; e != nil {
		r.lru.touch(e)
		return e.log, true
	}
	return nil, false
}

func (r *Registry) isClosed() bool {
	r.lockMap()
	defer r.unlockMap()
	return r.closed
}

// Close fences the registry: once it returns, no log is installed again
// (so the logs Keys lists then are all there will ever be to close), no
// WithTopic or WithPartitionClosed runs any more, and every one that was
// running has finished (Close takes each topic guard once after the
// fence). So nothing writes under a topic guard after it, and the node
// may release its data directory. It closes no log itself: the node
// closes each, between two commits (CloseLive still works).
func (r *Registry) Close() {
	r.lockMap()
	r.closed = true
	guards := make([]*TopicGuard, 0, len(r.guards))
	for _, g := range r.guards {
		guards = append(guards, g)
	}
	r.unlockMap()
	for _, g := range guards {
		// An empty section: waiting for the holder is the point.
		g.Lock()
		g.Unlock()
	}
}

// CloseLive closes key's open log the way every close of a live log must:
// the gate exclusive first, so it lands between two commits, then the
// topic guard, the drop from the map, and the close under the guard. A log
// not open is nothing to do.
func (r *Registry) CloseLive(key Key) error {
	defer r.lockPartition(key)()
	return r.dropAndClose(key)
}

// lockPartition takes key's produce gate exclusive, then its topic's
// guard, and returns what releases both.
func (r *Registry) lockPartition(key Key) (unlock func()) {
	gate := r.Gate(key)
	gate.Lock()
	g := r.Guard(key.Topic)
	g.Lock()
	return func() {
		g.Unlock()
		gate.Unlock()
	}
}

// dropAndClose drops key's entry and closes its log. Until the close is
// done the log keeps its slot of the budget (closing), so the descriptors
// it still holds are counted.
func (r *Registry) dropAndClose(key Key) error {
	r.lockMap()
	e := r.logs[key]
	if e != nil {
		delete(r.logs, key)
		r.lru.remove(e)
		r.closing++
	}
	r.unlockMap()
	if e == nil {
		return nil
	}
	defer func() { // even if a close panics and its caller recovers
		r.lockMap()
		r.closing--
		r.unlockMap()
	}()
	err := e.log.Close()
	if r.onClose != nil {
		r.onClose(key, e.log)
	}
	return err
}

// WithPartitionClosed closes key's live log between two commits (as
// CloseLive does) and runs fn under the same hold of the produce gate,
// exclusive, and of the topic's guard: no produce, no lazy reopen and no
// other lifecycle step of the topic runs until fn returns. fn replaces
// the partition's directory (a moved partition's install).
func (r *Registry) WithPartitionClosed(key Key, fn func(t *GuardedTopic) error) error {
	defer r.lockPartition(key)()
	if r.isClosed() {
		return fmt.Errorf("%w: %s/%d", ErrRegistryClosed, key.Topic, key.Partition)
	}
	if err := r.dropAndClose(key); err != nil {
		return fmt.Errorf("close the live log of %s/%d: %w", key.Topic, key.Partition, err)
	}
	return fn(&GuardedTopic{r: r, topic: key.Topic})
}

// WithTopic runs fn under topic's guard. fn gets the topic's open
// partitions and may close them with t.Close, which skips the produce
// gate: only a purge and the retirement of a stale incarnation may, since
// the topic they close has no valid commit left to protect.
//
// After Close it answers ErrRegistryClosed and runs nothing.
func (r *Registry) WithTopic(topic string, fn func(t *GuardedTopic) error) error {
	g := r.Guard(topic)
	g.Lock()
	defer g.Unlock()
	if r.isClosed() {
		return fmt.Errorf("%w: topic %s", ErrRegistryClosed, topic)
	}
	return fn(&GuardedTopic{r: r, topic: topic})
}

// GuardedTopic is a topic whose guard the caller holds.
type GuardedTopic struct {
	r     *Registry
	topic string

	opening  Key  // the partition Open opens under the guard
	reserved bool // Reserve took opening's slot
}

// Open lists the topic's open partitions, in order.
func (t *GuardedTopic) Open() []int {
	t.r.lockMap()
	defer t.r.unlockMap()
	var out []int
	for k := range t.r.logs {
		if k.Topic == t.topic {
			out = append(out, k.Partition)
		}
	}
	sort.Ints(out)
	return out
}

// Lookup returns an open partition's log.
func (t *GuardedTopic) Lookup(p int) (*partition.Log, bool) {
	return t.r.Lookup(Key{t.topic, p})
}

// CloseAll drops and closes every open log of the topic, without taking
// the produce gates (purge and stale-incarnation retirement only).
func (t *GuardedTopic) CloseAll() error {
	var errs []error
	for _, p := range t.Open() {
		errs = append(errs, t.r.dropAndClose(Key{t.topic, p}))
	}
	return errors.Join(errs...)
}

// Keys lists every open partition.
func (r *Registry) Keys() []Key {
	r.lockMap()
	defer r.unlockMap()
	out := make([]Key, 0, len(r.logs))
	for k := range r.logs {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].less(out[j]) })
	return out
}

// less orders keys by topic, then partition.
func (k Key) less(o Key) bool {
	if k.Topic != o.Topic {
		return k.Topic < o.Topic
	}
	return k.Partition < o.Partition
}

// IdleSince lists the open partitions not returned by Open since cutoff,
// in key order (so idle eviction closes them in the same order every
// time). It reads the front of the order of last use, so it costs what
// it returns, not what is open.
func (r *Registry) IdleSince(cutoff time.Time) []Key {
	r.lockMap()
	var out []Key
	for e, c := r.lru.front, r.lru.since(cutoff); e != nil && e.lastUsed < c; e = e.next {
		out = append(out, e.key)
	}
	r.unlockMap() // the sort runs without it: an Open waits on the map lock
	sort.Slice(out, func(i, j int) bool { return out[i].less(out[j]) })
	return out
}

// Len is the number of open logs.
func (r *Registry) Len() int {
	r.lockMap()
	defer r.unlockMap()
	return len(r.logs)
}

// TryLockForTest reports whether the gate was free, taking and releasing it
// at once: tests use it to prove a protocol holds the gate at a point.
func (g *Gate) TryLockForTest() bool {
	if !g.rw.TryLock() {
		return false
	}
	g.rw.Unlock()
	return true
}

// TryLockForTest reports whether the guard was free, taking and releasing
// it at once: tests use it to prove a protocol holds the guard at a point.
func (g *TopicGuard) TryLockForTest() bool {
	if !g.mu.TryLock() {
		return false
	}
	g.mu.Unlock()
	return true
}
