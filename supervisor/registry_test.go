package supervisor

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs/sim"
)

func openTestLog(t *testing.T, d *sim.Disk, dir string) func(*GuardedTopic) (*partition.Log, error) {
	return func(*GuardedTopic) (*partition.Log, error) { return partition.Open(dir, partition.Options{FS: d}) }
}

// TestLockOrder_CheckerCatchesAnInversion: taking a topic guard and then a
// produce gate is reported; the documented order is not.
func TestLockOrder_CheckerCatchesAnInversion(t *testing.T) {
	r := NewRegistry(RegistryOptions{CheckLockOrder: true})
	k := Key{"orders", 0}
	gate, guard := r.Gate(k), r.Guard("orders")
	gate.Lock()
	guard.Lock()
	guard.Unlock()
	gate.Unlock()
	if v := r.LockOrderViolations(); len(v) != 0 {
		t.Fatalf("the documented order was reported: %v", v)
	}
	guard.Lock()
	gate.LockShared()
	gate.UnlockShared()
	guard.Unlock()
	v := r.LockOrderViolations()
	if len(v) != 1 || !strings.Contains(v[0], "produce gate") || !strings.Contains(v[0], "topic guard") {
		t.Fatalf("an inversion was not reported as one: %v", v)
	}
	other := r.Guard("payments")
	guard.Lock()
	other.Lock()
	other.Unlock()
	guard.Unlock()
	if len(r.LockOrderViolations()) != 2 {
		t.Fatal("two topic guards held at once were not reported")
	}
}

// TestRegistry_OpenOnceCloseLive: concurrent first uses open a log once;
// CloseLive waits for produce calls holding the gate and closes between
// them; a closed log reopens lazily.
func TestRegistry_OpenOnceCloseLive(t *testing.T) {
	d := sim.NewDisk(1)
	r := NewRegistry(RegistryOptions{CheckLockOrder: true})
	k := Key{"orders", 0}
	opens := 0
	var mu sync.Mutex
	open := func(g *GuardedTopic) (*partition.Log, error) {
		mu.Lock()
		opens++
		mu.Unlock()
		return openTestLog(t, d, "/data/orders/p00000")(g)
	}
	var wg sync.WaitGroup
	logs := make([]*partition.Log, 8)
	for i := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gate := r.Gate(k)
			gate.LockShared()
			defer gate.UnlockShared()
			l, err := r.Open(k, open)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := l.Produce(t.Context(), []partition.Record{{Value: []byte("v")}}); err != nil {
				t.Error(err)
			}
			logs[i] = l
		}()
	}
	wg.Wait()
	if opens != 1 {
		t.Fatalf("%d opens, want 1", opens)
	}
	for _, l := range logs[1:] {
		if l != logs[0] {
			t.Fatal("callers got different logs")
		}
	}
	if err := r.CloseLive(k); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup(k); ok || r.Len() != 0 {
		t.Fatal("a closed log is still registered")
	}
	l, err := r.Open(k, open)
	if err != nil || l.HighWatermark() != 8 {
		t.Fatalf("reopen: %v, high watermark %d", err, l.HighWatermark())
	}
	if err := r.WithTopic("orders", func(g *GuardedTopic) error { return g.CloseAll() }); err != nil {
		t.Fatal(err)
	}
	if v := r.LockOrderViolations(); len(v) != 0 {
		t.Fatalf("lock-order violations: %v", v)
	}
}

// TestRegistry_CloseFencesAnOpenInFlight: an open whose log is made after
// Close set its fence closes that log itself and answers
// ErrRegistryClosed; Close returns only once that open let go of its
// topic's guard, and nothing is left registered.
func TestRegistry_CloseFencesAnOpenInFlight(t *testing.T) {
	d := sim.NewDisk(1)
	r := NewRegistry(RegistryOptions{CheckLockOrder: true})
	closed := make(chan struct{})
	var opened *partition.Log
	_, err := r.Open(Key{"orders", 0}, func(*GuardedTopic) (*partition.Log, error) {
		go func() { r.Close(); close(closed) }()
		for !r.isClosed() { // Close sets the fence at once, then waits for this guard
			runtime.Gosched()
		}
		var err error
		opened, err = partition.Open("/data/topics/orders/p00000", partition.Options{FS: d})
		return opened, err
	})
	if !errors.Is(err, ErrRegistryClosed) {
		t.Fatalf("open racing Close: %v, want ErrRegistryClosed", err)
	}
	<-closed
	if !opened.Closed() || r.Len() != 0 || d.OpenFiles() != 0 {
		t.Fatalf("after Close: log closed %v, %d registered, %d files open", opened.Closed(), r.Len(), d.OpenFiles())
	}
	if err := r.WithTopic("orders", func(*GuardedTopic) error { return nil }); !errors.Is(err, ErrRegistryClosed) {
		t.Fatalf("WithTopic after Close: %v", err)
	}
}
