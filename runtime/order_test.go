package runtime

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
)

// The node's background and parallel work makes its file calls in the
// same order every time, so a simulated run replays them exactly
// (internal/simulation).

// callLog records the partition of every call a disk sees on a file
// named file (hwm, consumer.ahead), as "<topic>/<partition dir> <op>".
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) hook(file string, hold func(sim.Call)) func(sim.Call) error {
	return func(c sim.Call) error {
		if path.Base(c.Path) != file {
			return nil
		}
		l.mu.Lock()
		l.calls = append(l.calls, fmt.Sprintf("%s %s", path.Base(path.Dir(path.Dir(c.Path)))+"/"+path.Base(path.Dir(c.Path)), c.Op))
		l.mu.Unlock()
		if hold != nil {
			hold(c)
		}
		return nil
	}
}

func (l *callLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// inKeyOrder checks that calls come partition by partition, in key order,
// never one partition's between another's.
func inKeyOrder(t *testing.T, what string, calls []string) {
	t.Helper()
	var parts []string
	for _, c := range calls {
		p, _, _ := strings.Cut(c, " ")
		if len(parts) == 0 || parts[len(parts)-1] != p {
			parts = append(parts, p)
		}
	}
	if !slices.IsSorted(parts) || len(slices.Compact(slices.Clone(parts))) != len(parts) {
		t.Fatalf("%s: calls by partition %v, want each partition's together, in key order (calls %v)", what, parts, calls)
	}
}

// TestCommitter_WritesPartitionsInKeyOrder: the consumer committer's tick
// and write-out visit the partitions acked since in key order, whatever
// order the acks came in. Five times over: a map's order passes once by
// luck.
func TestCommitter_WritesPartitionsInKeyOrder(t *testing.T) {
	for range 5 {
		synctest.Test(t, func(t *testing.T) {
			d := newTestDisk(t, 1)
			n := startNode(t, d, Config{})
			if _, _, err := n.CreateTopic(bg, "t", 5, Retention{}); err != nil {
				t.Fatal(err)
			}
			for p := range 5 {
				if _, err := n.Produce(bg, "t", p, recs("t", p, 0, 1)); err != nil {
					t.Fatal(err)
				}
			}
			var log callLog
			d.SetHook(log.hook("consumer.ahead", nil))
			for _, p := range []int{3, 1, 4, 0, 2} {
				if _, err := n.Ack(bg, "t", p, 0); err != nil {
					t.Fatal(err)
				}
			}
			<-time.After(2 * time.Second) // a tick and a write-out
			synctest.Wait()
			d.SetHook(nil)
			var writes, syncs []string
			for _, c := range log.list() {
				switch {
				case strings.HasSuffix(c, " write"):
					writes = append(writes, c)
				case strings.HasSuffix(c, " sync"):
					syncs = append(syncs, c)
				}
			}
			if len(writes) != 5 || len(syncs) != 5 {
				t.Fatalf("consumer.ahead calls %v: want a write and a sync for each of 5 partitions", log.list())
			}
			inKeyOrder(t, "ticks", writes)
			inKeyOrder(t, "write-outs", syncs)
		})
	}
}

// TestSerial_StartAndCloseWorkOnePartitionAtATimeInKeyOrder: with
// TestOptions.Serial, Start opens partitions and Close closes logs one at
// a time, in key order, even while the work of topic b's first partition
// is held back a second of the bubble's clock (which, run in parallel,
// the others' work would pass). Five times over: an order met by luck
// passes once.
func TestSerial_StartAndCloseWorkOnePartitionAtATimeInKeyOrder(t *testing.T) {
	for range 5 {
		synctest.Test(t, testSerialStartAndClose)
	}
}

func testSerialStartAndClose(t *testing.T) {
	d := newTestDisk(t, 1)
	cfg := func() Config {
		ms, err := OpenLocalMetastore(d, dataDir)
		if err != nil {
			t.Fatal(err)
		}
		return Config{DataDir: dataDir, FS: d, Metastore: ms, MaxOpenLogs: -1,
			Testing: &TestOptions{Serial: true, CheckLockOrder: true}}
	}
	n, err := New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"a", "b", "c"} {
		if _, _, err := n.CreateTopic(bg, topic, 3, Retention{}); err != nil {
			t.Fatal(err)
		}
		for p := range 3 {
			if _, err := n.Produce(bg, topic, p, recs(topic, p, 0, 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var held atomic.Bool
	holdFirst := func(c sim.Call) { // b's first partition, not the first of all: its own calls would hide a reorder
		if strings.Contains(c.Path, "/b/p00000/") && held.CompareAndSwap(false, true) {
			<-time.After(time.Second)
		}
	}
	var closing callLog
	d.SetHook(closing.hook("hwm", holdFirst))
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	inKeyOrder(t, "close", closing.list())

	held.Store(false)
	var starting callLog
	d.SetHook(starting.hook("hwm", holdFirst))
	if n, err = New(cfg()); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		t.Fatal(err)
	}
	d.SetHook(nil)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if len(starting.list()) == 0 {
		t.Fatal("start read no hwm file")
	}
	// Two passes, each in key order: the boundary check reads every
	// hwm file, then the budget's opens read them again.
	calls := starting.list()
	first := func(c string) bool { return strings.HasPrefix(c, "a/p00000 ") }
	split := -1
	if other := slices.IndexFunc(calls, func(c string) bool { return !first(c) }); other >= 0 {
		if i := slices.IndexFunc(calls[other:], first); i >= 0 {
			split = other + i
		}
	}
	if split < 0 {
		t.Fatalf("start: no open read a's first partition (calls %v)", calls)
	}
	inKeyOrder(t, "start's check", calls[:split])
	inKeyOrder(t, "start's opens", calls[split:])
	if v := n.LockOrderViolations(); len(v) > 0 {
		t.Fatalf("lock-order violations: %v", v)
	}
}

// TestCursors_WriteOutInKeyOrder: a write-out pass and the node's Close
// write the moved cursors out by topic, partition and name, whatever
// order they moved in. Five times over: a map's order passes once by luck.
func TestCursors_WriteOutInKeyOrder(t *testing.T) {
	for range 5 {
		synctest.Test(t, func(t *testing.T) {
			d := newTestDisk(t, 1)
			n := startNodeNoCleanup(t, d)
			if _, _, err := n.CreateTopic(bg, "t", 3, Retention{}); err != nil {
				t.Fatal(err)
			}
			for p := range 3 {
				if _, err := n.Produce(bg, "t", p, recs("t", p, 0, 3)); err != nil {
					t.Fatal(err)
				}
			}
			names := []string{"b", "c", "a"}
			for _, name := range names {
				if _, err := n.CreateCursor(bg, "t", name, CursorEarliest); err != nil {
					t.Fatal(err)
				}
			}
			var calls callLog
			writes := func() []string {
				var out []string
				for _, c := range calls.list() {
					if strings.HasSuffix(c, " write") {
						out = append(out, c)
					}
				}
				return out
			}
			move := func(to int64) {
				for _, p := range []int{2, 0, 1} {
					for _, name := range names {
						if err := n.CommitCursor(bg, "t", name, p, to); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			d.SetHook(func(c sim.Call) error {
				if base := path.Base(c.Path); strings.HasPrefix(base, "cursor.") {
					calls.mu.Lock()
					calls.calls = append(calls.calls, fmt.Sprintf("%s/%s %s", path.Base(path.Dir(c.Path)), base, c.Op))
					calls.mu.Unlock()
				}
				return nil
			})
			move(1)
			<-time.After(2 * time.Second) // a write-out pass
			synctest.Wait()
			pass := writes()
			calls.mu.Lock()
			calls.calls = nil
			calls.mu.Unlock()
			move(2)
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
			d.SetHook(nil)
			closing := writes()
			for what, got := range map[string][]string{"write-out": pass, "close": closing} {
				if len(got) != 9 || !slices.IsSorted(got) {
					t.Fatalf("%s: cursor writes %v, want 9, by partition and name", what, got)
				}
			}
		})
	}
}
