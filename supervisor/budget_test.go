package supervisor

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs/sim"
)

func openByKey(d *sim.Disk, k Key) func(*GuardedTopic) (*partition.Log, error) {
	return func(g *GuardedTopic) (*partition.Log, error) {
		if err := g.Reserve(); err != nil {
			return nil, err
		}
		return partition.Open(fmt.Sprintf("/data/%s/p%05d", k.Topic, k.Partition), partition.Options{FS: d})
	}
}

func closeAll(t *testing.T, r *Registry) {
	t.Helper()
	r.Close()
	for _, k := range r.Keys() {
		if err := r.CloseLive(k); err != nil {
			t.Error(err)
		}
	}
}

// TestBudget_ClosesTheLeastRecentlyUsedIdleLog: past MaxOpen, an open
// closes the log used least recently, cleanly (its high watermark back
// on reopen), and counts the eviction. Uses a second apart are a second
// of the bubble's clock.
func TestBudget_ClosesTheLeastRecentlyUsedIdleLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(1)
		var evicted []Key
		r := NewRegistry(RegistryOptions{CheckLockOrder: true, MaxOpen: 2, OnEvict: func(k Key, err error) {
			if err != nil {
				t.Errorf("evict %v: %v", k, err)
			}
			evicted = append(evicted, k)
		}})
		defer closeAll(t, r)
		a, b, c := Key{"orders", 0}, Key{"orders", 1}, Key{"payments", 0}
		la, err := r.Open(a, openByKey(d, a))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := la.Produce(t.Context(), []partition.Record{{Value: []byte("x")}, {Value: []byte("y")}}); err != nil {
			t.Fatal(err)
		}
		<-time.After(time.Second)
		lb, err := r.Open(b, openByKey(d, b))
		if err != nil {
			t.Fatal(err)
		}
		<-time.After(time.Second)
		if _, err := r.Open(a, openByKey(d, a)); err != nil { // a is now the most recent
			t.Fatal(err)
		}
		<-time.After(time.Second)
		if _, err := r.Open(c, openByKey(d, c)); err != nil {
			t.Fatal(err)
		}
		if !lb.Closed() || la.Closed() || r.Len() != 2 {
			t.Fatalf("after the third open: b closed %v, a closed %v, %d open; want b closed, a open, 2 open", lb.Closed(), la.Closed(), r.Len())
		}
		if len(evicted) != 1 || evicted[0] != b || r.Evictions() != 1 {
			t.Fatalf("evicted %v (count %d), want [%v]", evicted, r.Evictions(), b)
		}
		<-time.After(time.Second)
		if _, err := r.Open(b, openByKey(d, b)); err != nil { // evicts a, whose hwm is written
			t.Fatal(err)
		}
		if !la.Closed() {
			t.Fatal("a, least recently used, was not evicted for b")
		}
		la, err = r.Open(a, openByKey(d, a))
		if err != nil || la.HighWatermark() != 2 {
			t.Fatalf("a reopened after its eviction: hwm %d, %v; want 2", la.HighWatermark(), err)
		}
		if v := r.LockOrderViolations(); len(v) != 0 {
			t.Fatalf("lock-order violations: %v", v)
		}
	})
}

// TestBudget_NeverClosesALogInUse: a log whose produce gate is held, or
// whose topic's guard is held, is not evicted; with every open log in use
// an open fails with ErrNoRoom and leaves them all open, and succeeds once
// one is free.
func TestBudget_NeverClosesALogInUse(t *testing.T) {
	d := sim.NewDisk(1)
	r := NewRegistry(RegistryOptions{CheckLockOrder: true, MaxOpen: 2})
	defer closeAll(t, r)
	a, b, c := Key{"orders", 0}, Key{"payments", 0}, Key{"audit", 0}
	la, err := r.Open(a, openByKey(d, a))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := r.Open(b, openByKey(d, b))
	if err != nil {
		t.Fatal(err)
	}
	gate := r.Gate(a)
	gate.LockShared() // a produce in flight on a
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { // b's topic busy (an open, a close, a purge)
		r.WithTopic(b.Topic, func(*GuardedTopic) error { close(held); <-release; return nil })
		close(done)
	}()
	<-held
	if _, err := r.Open(c, openByKey(d, c)); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("open with every log in use: %v, want ErrNoRoom", err)
	}
	if la.Closed() || lb.Closed() || r.Len() != 2 {
		t.Fatalf("a refused open closed a log in use: a %v, b %v, %d open", la.Closed(), lb.Closed(), r.Len())
	}
	close(release)
	<-done
	if _, err := r.Open(c, openByKey(d, c)); err != nil {
		t.Fatalf("open once b is idle: %v", err)
	}
	if !lb.Closed() || la.Closed() {
		t.Fatalf("b idle should be evicted and a in use kept: a closed %v, b closed %v", la.Closed(), lb.Closed())
	}
	gate.UnlockShared()
	if v := r.LockOrderViolations(); len(v) != 0 {
		t.Fatalf("lock-order violations: %v", v)
	}
}

// TestBudget_NeverMoreOpenThanTheBudget: goroutines opening and using
// many partitions at once, each holding its partition's gate as a
// produce does, never have more logs open at a time than MaxOpen, every
// record committed is there when its log is reopened, and the lock order
// holds.
func TestBudget_NeverMoreOpenThanTheBudget(t *testing.T) {
	const maxOpen, partitions, workers, rounds = 3, 12, 6, 40
	d := sim.NewDisk(1)
	var live, peak atomic.Int64
	r := NewRegistry(RegistryOptions{CheckLockOrder: true, MaxOpen: maxOpen,
		OnClose: func(Key, *partition.Log) { live.Add(-1) }})
	defer closeAll(t, r)
	open := func(k Key) func(*GuardedTopic) (*partition.Log, error) {
		return func(g *GuardedTopic) (*partition.Log, error) {
			l, err := openByKey(d, k)(g)
			if err == nil {
				if n := live.Add(1); n > peak.Load() {
					peak.Store(n)
				}
			}
			return l, err
		}
	}
	var produced [partitions]atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				idx := (w*7 + i) % partitions
				k := Key{fmt.Sprintf("t%d", idx%4), idx / 4}
				gate := r.Gate(k)
				gate.LockShared()
				l, err := r.Open(k, open(k))
				if errors.Is(err, ErrNoRoom) {
					gate.UnlockShared()
					continue // every log busy: the caller retries later
				}
				if err != nil {
					gate.UnlockShared()
					t.Error(err)
					return
				}
				if _, err := l.Produce(t.Context(), []partition.Record{{Value: []byte("v")}}); err != nil {
					gate.UnlockShared()
					t.Error(err)
					return
				}
				produced[idx].Add(1)
				gate.UnlockShared()
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > maxOpen {
		t.Fatalf("%d logs open at once, budget %d", p, maxOpen)
	}
	if r.Evictions() == 0 {
		t.Fatal("no eviction: the test did not press the budget")
	}
	for idx := range partitions {
		k := Key{fmt.Sprintf("t%d", idx%4), idx / 4}
		l, err := r.Open(k, open(k))
		if err != nil {
			t.Fatal(err)
		}
		if hwm := l.HighWatermark(); hwm != produced[idx].Load() {
			t.Fatalf("%v: high watermark %d after evictions, %d records committed", k, hwm, produced[idx].Load())
		}
	}
	if v := r.LockOrderViolations(); len(v) != 0 {
		t.Fatalf("lock-order violations: %v", v)
	}
}

// TestBudget_NoEvictionPastTheCloseFence: once Close has fenced the
// registry, an eviction an open already under way attempts closes
// nothing: the node closes every log itself, and nothing runs under a
// guard after Close returns (found by review).
func TestBudget_NoEvictionPastTheCloseFence(t *testing.T) {
	d := sim.NewDisk(1)
	ran := false
	r := NewRegistry(RegistryOptions{MaxOpen: 1, OnClose: func(Key, *partition.Log) { ran = true }})
	a := Key{"orders", 0}
	la, err := r.Open(a, openByKey(d, a))
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, r)
	r.Close()
	if r.tryEvict(a, "") || la.Closed() || ran {
		t.Fatalf("an eviction after Close closed %v (OnClose ran: %v)", a, ran)
	}
}

// TestBudget_APanickingCloseGivesItsSlotBack: a close (or its OnClose)
// that panics, recovered by its caller, still gives its slot back: the
// budget does not shrink (found by review).
func TestBudget_APanickingCloseGivesItsSlotBack(t *testing.T) {
	d := sim.NewDisk(1)
	var panicOnce atomic.Bool
	panicOnce.Store(true)
	r := NewRegistry(RegistryOptions{MaxOpen: 2, OnClose: func(Key, *partition.Log) {
		if panicOnce.Swap(false) {
			panic("consumer write-out")
		}
	}})
	defer closeAll(t, r)
	a, b, c := Key{"a", 0}, Key{"b", 0}, Key{"c", 0}
	for _, k := range []Key{a, b} {
		if _, err := r.Open(k, openByKey(d, k)); err != nil {
			t.Fatal(err)
		}
	}
	func() {
		defer func() { recover() }()
		r.Open(c, openByKey(d, c)) // evicts a; its OnClose panics
	}()
	if _, err := r.Open(c, openByKey(d, c)); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 2 {
		t.Fatalf("budget 2, %d open after the panic: the panicked close kept its slot", r.Len())
	}
}

// TestBudget_AnOpenEvictsLogsOfItsOwnTopic: the opener holds its topic's
// guard when it reserves, and may close that topic's idle logs: a node of
// one topic with more partitions than its budget serves them all.
func TestBudget_AnOpenEvictsLogsOfItsOwnTopic(t *testing.T) {
	d := sim.NewDisk(1)
	r := NewRegistry(RegistryOptions{CheckLockOrder: true, MaxOpen: 2})
	defer closeAll(t, r)
	for p := range 5 {
		k := Key{"orders", p}
		if _, err := r.Open(k, openByKey(d, k)); err != nil {
			t.Fatalf("open of partition %d: %v", p, err)
		}
	}
	if r.Len() != 2 || r.Evictions() != 3 {
		t.Fatalf("%d open, %d evicted; want 2 and 3", r.Len(), r.Evictions())
	}
	if v := r.LockOrderViolations(); len(v) != 0 {
		t.Fatalf("lock-order violations: %v", v)
	}
}

// TestBudget_ConcurrentOpensOfOnePartitionTakeOneSlot: callers opening one
// partition at once reserve under its topic's guard, so only the one that
// opens it takes a slot, and a refused or redundant open evicts nothing
// (found by review).
func TestBudget_ConcurrentOpensOfOnePartitionTakeOneSlot(t *testing.T) {
	d := sim.NewDisk(1)
	r := NewRegistry(RegistryOptions{MaxOpen: 4})
	defer closeAll(t, r)
	for _, topic := range []string{"x", "y", "z"} {
		k := Key{topic, 0}
		if _, err := r.Open(k, openByKey(d, k)); err != nil {
			t.Fatal(err)
		}
	}
	hot := Key{"hot", 0}
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		r.WithTopic("hot", func(*GuardedTopic) error { close(held); <-release; return nil })
		close(done)
	}()
	<-held
	var wg sync.WaitGroup
	var started sync.WaitGroup
	for range 3 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			if _, err := r.Open(hot, openByKey(d, hot)); err != nil {
				t.Error(err)
			}
		}()
	}
	started.Wait()
	for range 1000 { // let the opens reach the guard (a mutex wait synctest cannot see)
		runtime.Gosched()
	}
	close(release)
	<-done
	wg.Wait()
	if r.Evictions() != 0 || r.Len() != 4 {
		t.Fatalf("one open with a free slot: %d evicted, %d open", r.Evictions(), r.Len())
	}
	if _, err := r.Open(Key{"nope", 0}, func(*GuardedTopic) (*partition.Log, error) { return nil, errors.New("no such topic") }); err == nil {
		t.Fatal("an invalid open succeeded")
	}
	if r.Evictions() != 0 {
		t.Fatal("a refused open evicted a live log")
	}
}

// TestBudget_ALogFoundInUseIsNotTriedAgainByTheNextOpen: a victim found
// in use counts as used then (it moves to the back of the order of last
// use), so the next open past the budget goes straight to an idle log
// instead of trying every busy one again: the choice stays O(1) however
// many logs are busy at the front.
func TestBudget_ALogFoundInUseIsNotTriedAgainByTheNextOpen(t *testing.T) {
	d := sim.NewDisk(1)
	retained := map[Key]bool{{"a", 0}: true, {"a", 1}: true, {"a", 2}: true} // retention works on them: not evictable
	var asked []Key
	r := NewRegistry(RegistryOptions{CheckLockOrder: true, MaxOpen: 5, Evictable: func(k Key, _ *partition.Log) bool {
		asked = append(asked, k)
		return !retained[k]
	}})
	defer closeAll(t, r)
	for _, k := range []Key{{"a", 0}, {"a", 1}, {"a", 2}, {"b", 0}, {"b", 1}} {
		if _, err := r.Open(k, openByKey(d, k)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Open(Key{"c", 0}, openByKey(d, Key{"c", 0})); err != nil {
		t.Fatal(err)
	}
	if want := []Key{{"a", 0}, {"a", 1}, {"a", 2}, {"b", 0}}; !slices.Equal(asked, want) {
		t.Fatalf("the first open past the budget asked about %v, want %v", asked, want)
	}
	asked = nil
	if _, err := r.Open(Key{"c", 1}, openByKey(d, Key{"c", 1})); err != nil {
		t.Fatal(err)
	}
	if want := []Key{{"b", 1}}; !slices.Equal(asked, want) {
		t.Fatalf("the next open asked about %v, want %v: the logs found in use before were tried again", asked, want)
	}
	if v := r.LockOrderViolations(); len(v) != 0 {
		t.Fatalf("lock-order violations: %v", v)
	}
}
