package supervisor

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs/sim"
)

// lruModel is the reference the budget is checked against: a plain
// slice of the open keys, least recently used first, with the time of
// each one's last use. A victim is the first key not in use; each key in
// use met before it counts as used now (moves to the back), and with
// every key in use the open fails.
type lruModel struct {
	order    []Key
	lastUsed map[Key]time.Time
	skips    int // keys found in use by a victim's choice
}

func (m *lruModel) open(k Key) bool { return slices.Contains(m.order, k) }

func (m *lruModel) use(k Key, now time.Time) {
	m.drop(k)
	m.order = append(m.order, k)
	m.lastUsed[k] = now
}

func (m *lruModel) drop(k Key) {
	if i := slices.Index(m.order, k); i >= 0 {
		m.order = slices.Delete(m.order, i, i+1)
	}
}

// victim applies the budget's choice: the key to evict, or false when
// every open key is in use.
func (m *lruModel) victim(inUse func(Key) bool, now time.Time) (Key, bool) {
	for range len(m.order) {
		k := m.order[0]
		if !inUse(k) {
			return k, true
		}
		m.use(k, now)
		m.skips++
	}
	return Key{}, false
}

func (m *lruModel) idleSince(cutoff time.Time) []Key {
	var out []Key
	for _, k := range m.order {
		if m.lastUsed[k].Before(cutoff) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b Key) int {
		if a.less(b) {
			return -1
		}
		return 1
	})
	return out
}

// TestBudget_ModelRandomInterleavings runs random interleavings of opens,
// uses, closes, gates and topic guards held (logs in use), logs retention
// keeps (not evictable), idle listings and time passing against the
// reference LRU: every eviction closes the log the reference chooses,
// every open the reference finds no room for fails with ErrNoRoom and
// closes nothing, IdleSince lists what the reference does, the budget is
// never exceeded, and the lock order holds (the rule: docs/design.md,
// "Opening and closing logs": the least recently used log nobody is
// using).
func TestBudget_ModelRandomInterleavings(t *testing.T) {
	var seen modelCoverage
	for seed := range uint64(24) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runBudgetModel(t, seed, 400, &seen) })
		})
	}
	if seen.evictions == 0 || seen.skipsInUse == 0 || seen.noRoom == 0 || seen.idleListed == 0 {
		t.Fatalf("the runs did not reach every case: %+v", seen)
	}
}

// modelCoverage counts what the model runs met, so a change that stops
// them reaching a case fails rather than passing vacuously.
type modelCoverage struct{ evictions, skipsInUse, noRoom, idleListed int }

func runBudgetModel(t *testing.T, seed uint64, steps int, seen *modelCoverage) {
	rng := rand.New(rand.NewPCG(seed, 40))
	maxOpen := 1 + rng.IntN(5)
	topics := []string{"a", "b", "c"}
	keys := make([]Key, 0, 12)
	for _, tp := range topics {
		for p := range 4 {
			keys = append(keys, Key{tp, p})
		}
	}
	d := sim.NewDisk(seed)
	var evicted []Key
	retained := map[Key]bool{}
	r := NewRegistry(RegistryOptions{CheckLockOrder: true, MaxOpen: maxOpen,
		OnEvict: func(k Key, err error) {
			if err != nil {
				t.Errorf("evict %v: %v", k, err)
			}
			evicted = append(evicted, k)
		},
		Evictable: func(k Key, _ *partition.Log) bool { return !retained[k] },
	})
	defer closeAll(t, r)
	model := &lruModel{lastUsed: map[Key]time.Time{}}
	held := map[Key]func(){} // gates held shared, each by a goroutine of its own (a produce in flight): the release
	holdGate := func(k Key) {
		taken, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			g := r.Gate(k)
			g.LockShared()
			close(taken)
			<-release
			g.UnlockShared()
		}()
		<-taken
		held[k] = func() { close(release); <-done }
	}
	var guardTopic string // a topic whose guard another goroutine holds
	var releaseGuard chan struct{}
	var guardDone chan struct{}
	holdGuard := func(topic string) {
		held, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			r.WithTopic(topic, func(*GuardedTopic) error { close(held); <-release; return nil })
		}()
		<-held
		guardTopic, releaseGuard, guardDone = topic, release, done
	}
	freeGuard := func() {
		if guardTopic != "" {
			close(releaseGuard)
			<-guardDone
			guardTopic = ""
		}
	}
	defer freeGuard()
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	inUse := func(opener string) func(Key) bool {
		return func(k Key) bool {
			return held[k] != nil || retained[k] || (k.Topic == guardTopic && k.Topic != opener)
		}
	}

	for step := range steps {
		k := keys[rng.IntN(len(keys))]
		switch op := rng.IntN(20); {
		case op < 9: // open or use
			if k.Topic == guardTopic {
				continue // it would wait for the guard
			}
			now := time.Now()
			wantOpen, wantVictim, room := model.open(k), Key{}, true
			if !wantOpen && len(model.order) >= maxOpen {
				wantVictim, room = model.victim(inUse(k.Topic), now)
			}
			evicted = evicted[:0]
			_, err := r.Open(k, openByKey(d, k))
			switch {
			case !room:
				if !errors.Is(err, ErrNoRoom) || len(evicted) != 0 {
					t.Fatalf("step %d: open of %v with every log in use: %v, evicted %v; want ErrNoRoom and none", step, k, err, evicted)
				}
				seen.noRoom++
				continue
			case err != nil:
				t.Fatalf("step %d: open of %v: %v", step, k, err)
			case wantVictim != Key{}:
				if len(evicted) != 1 || evicted[0] != wantVictim {
					t.Fatalf("step %d: open of %v evicted %v, the reference LRU %v (order %v)", step, k, evicted, wantVictim, model.order)
				}
				model.drop(wantVictim)
				seen.evictions++
			case len(evicted) != 0:
				t.Fatalf("step %d: open of %v with room evicted %v", step, k, evicted)
			}
			model.use(k, now)
		case op < 12: // hold or release a gate: a produce in flight
			if release := held[k]; release != nil {
				release()
				delete(held, k)
			} else {
				holdGate(k)
			}
		case op < 14: // close a log not in use
			if held[k] != nil || k.Topic == guardTopic {
				continue
			}
			if err := r.CloseLive(k); err != nil {
				t.Fatalf("step %d: close %v: %v", step, k, err)
			}
			model.drop(k)
		case op < 15: // a topic's guard held, or let go
			if guardTopic != "" {
				freeGuard()
			} else {
				holdGuard(k.Topic)
			}
		case op < 16: // retention works on the log, or is done
			retained[k] = !retained[k]
		case op < 18: // time passes
			time.Sleep(time.Duration(1+rng.IntN(3)) * time.Second)
		default: // idle listing
			cutoff := time.Now().Add(-time.Duration(rng.IntN(4)) * time.Second)
			got, want := r.IdleSince(cutoff), model.idleSince(cutoff)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: IdleSince lists %v, the reference %v", step, got, want)
			}
			seen.idleListed += len(got)
		}
		if r.Len() > maxOpen {
			t.Fatalf("step %d: %d logs open, budget %d", step, r.Len(), maxOpen)
		}
		if r.Len() != len(model.order) {
			t.Fatalf("step %d: %d logs open, the reference %d", step, r.Len(), len(model.order))
		}
	}
	seen.skipsInUse += model.skips
	if v := r.LockOrderViolations(); len(v) != 0 {
		t.Fatalf("lock-order violations: %v", v)
	}
}
