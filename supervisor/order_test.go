package supervisor

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
)

// The registry's choices among logs are a function of the order of
// calls, not of its map's (random) order nor of the clock, so a simulated
// run replays them: the logs idle eviction closes (in key order), and
// which of the logs last used at one instant the budget evicts (the one
// whose last use came first). Each case runs ten times over: a map order
// passes once by luck.

func TestRegistry_IdleSinceListsKeysInOrder(t *testing.T) {
	keys := []Key{{"b", 1}, {"a", 2}, {"c", 0}, {"a", 0}, {"b", 0}, {"a", 1}}
	want := slices.Clone(keys)
	slices.SortFunc(want, func(x, y Key) int {
		if x.Topic < y.Topic || (x.Topic == y.Topic && x.Partition < y.Partition) {
			return -1
		}
		return 1
	})
	for range 10 {
		synctest.Test(t, func(t *testing.T) {
			d := sim.NewDisk(1)
			r := NewRegistry(RegistryOptions{})
			defer closeAll(t, r)
			for _, k := range keys {
				if _, err := r.Open(k, openByKey(d, k)); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.IdleSince(time.Now().Add(time.Second)); !slices.Equal(got, want) {
				t.Fatalf("IdleSince lists %v, want %v", got, want)
			}
		})
	}
}

func TestBudget_LogsUsedAtOneInstantGoInTheOrderOfCalls(t *testing.T) {
	for range 10 {
		synctest.Test(t, func(t *testing.T) {
			d := sim.NewDisk(1)
			var evicted []Key
			r := NewRegistry(RegistryOptions{MaxOpen: 3, OnEvict: func(k Key, err error) { evicted = append(evicted, k) }})
			defer closeAll(t, r)
			// One instant: no time passes. c is opened first, then used
			// again after a: the least recently used is a, then b.
			for _, k := range []Key{{"c", 0}, {"a", 1}, {"c", 0}, {"b", 0}, {"d", 0}, {"e", 0}} {
				if _, err := r.Open(k, openByKey(d, k)); err != nil {
					t.Fatal(err)
				}
			}
			if want := []Key{{"a", 1}, {"c", 0}}; !slices.Equal(evicted, want) {
				t.Fatalf("evicted %v, want %v", evicted, want)
			}
		})
	}
}
