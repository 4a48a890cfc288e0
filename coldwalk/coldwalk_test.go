package coldwalk

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Tests of the walk's own decisions against a fake node: what it lists and
// stats, what it asks the node to sweep, when it runs, and how it contains
// a panic. The runtime's tests run it against a real node (the guarded
// open, the directory check, the sweep and close).

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const topicsDir = "/data/topics"

func advance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

// fakeNode answers from maps and records what the walk asks it to sweep.
type fakeNode struct {
	mu        sync.Mutex
	caughtUp  bool
	retention map[string]time.Duration
	maxBytes  map[string]int64
	open      map[string]bool // "topic/p"
	foreign   map[string]bool // not assigned to this node
	panicking map[string]bool // SweepCold panics
	swept     []string
}

func newFakeNode() *fakeNode {
	return &fakeNode{caughtUp: true, retention: map[string]time.Duration{}, maxBytes: map[string]int64{},
		open: map[string]bool{}, foreign: map[string]bool{}, panicking: map[string]bool{}}
}

func (f *fakeNode) CaughtUp() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.caughtUp
}

func (f *fakeNode) Retention(_ context.Context, topic string) (time.Duration, int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.retention[topic]
	return r, f.maxBytes[topic], ok, nil
}

func (f *fakeNode) Assigned(_ context.Context, topic string, p int) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.foreign[fmt.Sprintf("%s/%d", topic, p)], nil
}

func (f *fakeNode) IsOpen(topic string, p int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open[fmt.Sprintf("%s/%d", topic, p)]
}

func (f *fakeNode) SweepCold(_ context.Context, topic string, p int) (partition.SweepResult, error) {
	key := fmt.Sprintf("%s/%d", topic, p)
	f.mu.Lock()
	f.swept = append(f.swept, key)
	boom := f.panicking[key]
	f.mu.Unlock()
	if boom {
		panic("open exploded")
	}
	return partition.SweepResult{DeletedSegments: 1}, nil
}

func (f *fakeNode) takeSwept() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.swept
	f.swept = nil
	return out
}

// writeSegment creates topic/pNNNNN/<base>.log holding size bytes, its
// mtime the bubble's now.
func writeSegment(t *testing.T, d *sim.Disk, topic string, p int, base int64, size int) {
	t.Helper()
	dirName, _ := wire.PartitionDirName(p)
	name, _ := wire.SegmentFileName(base)
	dir := path.Join(topicsDir, topic, dirName)
	if err := d.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	f, err := d.OpenFile(path.Join(dir, name), os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

type walkTest struct {
	disk *sim.Disk
	node *fakeNode
	reg  *prometheus.Registry
	logs *observer.ObservedLogs
}

func startWalk(t *testing.T, d *sim.Disk, node *fakeNode) *walkTest {
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	loop := Start(Config{FS: d, TopicsDir: topicsDir, Node: node, Logger: zap.New(core), Registerer: reg})
	t.Cleanup(func() {
		if err := loop.Close(); err != nil {
			t.Errorf("close the walk: %v", err)
		}
	})
	return &walkTest{disk: d, node: node, reg: reg, logs: logs}
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// The walk asks the node to sweep exactly the partitions it owns, whose
// logs are closed, and that hold an expired segment by their file times;
// it never stats an open or another node's partition, and it skips
// quarantined directories, unknown topics, topics without an age bound and
// names no partition has.
func TestWalk_SweepsOnlyOwnedClosedExpiredPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(1)
		node := newFakeNode()
		node.retention["orders"] = time.Hour
		node.retention["forever"] = 0
		for p := range 6 {
			writeSegment(t, d, "orders", p, 0, 100)
		}
		writeSegment(t, d, "orders.stale-0123456789abcdef", 0, 0, 100) // quarantined
		writeSegment(t, d, "unknown", 0, 0, 100)                       // no record: the purge's
		writeSegment(t, d, "forever", 0, 0, 100)                       // no age bound
		d.MkdirAll(path.Join(topicsDir, "orders", "p00009.staging"))   // a move's staging directory
		d.MkdirAll(path.Join(topicsDir, "orders", "p7"))
		vfs.WriteFileAtomic(d, path.Join(topicsDir, "orders", wire.IncarnationFileName), []byte("x"))
		node.open["orders/1"] = true
		node.foreign["orders/2"] = true
		advance(2 * time.Hour)
		writeSegment(t, d, "orders", 3, 10, 100) // p3: an expired sealed segment, a fresh active one
		writeSegment(t, d, "orders", 4, 0, 10)   // p4: its only segment written again just now
		writeSegment(t, d, "orders", 5, 10, 0)   // p5: an expired sealed segment, an empty active one
		var mu sync.Mutex
		stats := map[string]int{}
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpStat {
				mu.Lock()
				stats[path.Dir(c.Path)]++
				mu.Unlock()
			}
			return nil
		})
		defer d.SetHook(nil)
		w := startWalk(t, d, node)

		advance(DefaultInterval)
		got := w.node.takeSwept()
		want := []string{"orders/0", "orders/3", "orders/5"}
		if !slices.Equal(got, want) {
			t.Fatalf("swept %v, want %v", got, want)
		}
		if got := counter(t, w.reg, "narad_cold_retention_swept_total"); got != 3 {
			t.Fatalf("swept_total = %v, want 3", got)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, dir := range []string{"p00001", "p00002"} {
			if n := stats[path.Join(topicsDir, "orders", dir)]; n != 0 {
				t.Errorf("%s (open or another node's) stat'ed %d times", dir, n)
			}
		}
	})
}

// The walk runs only while the metadata replica is caught up: it does not
// even list the data directory until it is.
func TestWalk_RunsOnlyWhileCaughtUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(2)
		node := newFakeNode()
		node.retention["orders"] = time.Hour
		node.caughtUp = false
		writeSegment(t, d, "orders", 0, 0, 100)
		advance(2 * time.Hour)
		var mu sync.Mutex
		listings := 0
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpReadDir {
				mu.Lock()
				listings++
				mu.Unlock()
			}
			return nil
		})
		defer d.SetHook(nil)
		w := startWalk(t, d, node)

		advance(3 * DefaultInterval)
		mu.Lock()
		if got := w.node.takeSwept(); len(got) != 0 || listings != 0 {
			t.Fatalf("behind the leader: swept %v, listed %d directories", got, listings)
		}
		mu.Unlock()
		node.mu.Lock()
		node.caughtUp = true
		node.mu.Unlock()
		advance(DefaultInterval)
		if got := w.node.takeSwept(); !slices.Equal(got, []string{"orders/0"}) {
			t.Fatalf("caught up: swept %v", got)
		}
	})
}

// A panic in one partition's open, sweep or close is logged at error with
// the partition and the stack, counted in narad_cold_retention_panics_total,
// and the walk goes on; the partition is left alone for 30 minutes, then
// visited again.
func TestWalk_PanicIsContainedAndThePartitionLeftAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(3)
		node := newFakeNode()
		node.retention["orders"] = time.Hour
		for p := range 3 {
			writeSegment(t, d, "orders", p, 0, 100)
		}
		node.panicking["orders/1"] = true
		advance(2 * time.Hour)
		w := startWalk(t, d, node)

		advance(DefaultInterval)
		if got := w.node.takeSwept(); !slices.Equal(got, []string{"orders/0", "orders/1", "orders/2"}) {
			t.Fatalf("first walk asked for %v", got)
		}
		if got := counter(t, w.reg, "narad_cold_retention_panics_total"); got != 1 {
			t.Fatalf("panics_total = %v, want 1", got)
		}
		if got := counter(t, w.reg, "narad_cold_retention_swept_total"); got != 2 {
			t.Fatalf("swept_total = %v, want 2", got)
		}
		entries := w.logs.FilterMessage("supervised loop recovered a panic").All()
		if len(entries) != 1 || entries[0].Level != zapcore.ErrorLevel {
			t.Fatalf("panic log lines %v", entries)
		}
		if f := entries[0].ContextMap(); f["key"] != "orders/1" || f["stack"] == "" || f["loop"] != "cold_retention" {
			t.Fatalf("panic logged with %v", f)
		}
		// The fake sweeps nothing, so partitions 0 and 2 come up again
		// every walk; partition 1 does not for 30 minutes.
		for walk := 2; walk <= 6; walk++ { // up to 30 minutes after the panic
			advance(DefaultInterval)
			if got := w.node.takeSwept(); slices.Contains(got, "orders/1") {
				t.Fatalf("walk %d (%v after the panic) visited the partition left alone", walk, time.Duration(walk-1)*DefaultInterval)
			}
		}
		advance(DefaultInterval)
		if got := w.node.takeSwept(); !slices.Contains(got, "orders/1") {
			t.Fatalf("35 minutes after the panic, the walk still leaves the partition alone: %v", got)
		}
	})
}

// expiredOnDisk is the log's own rule (partition.Log.Expired) with mtimes
// for last writes: the oldest sealed segment older than the cutoff, or a
// non-empty active segment older than it.
func TestExpiredOnDisk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type seg struct {
			base int64
			size int
			old  bool // written before the cutoff
		}
		tests := []struct {
			name string
			segs []seg
			want bool
		}{
			{"no segment", nil, false},
			{"an empty active segment, old", []seg{{0, 0, true}}, false},
			{"a written active segment, old", []seg{{0, 10, true}}, true},
			{"a written active segment, fresh", []seg{{0, 10, false}}, false},
			{"an old sealed segment", []seg{{0, 10, true}, {5, 0, false}}, true},
			{"a fresh sealed segment, an old empty active", []seg{{0, 10, false}, {5, 0, true}}, false},
			{"fresh sealed segments, an old written active", []seg{{0, 10, false}, {5, 10, true}}, true},
		}
		for i, tc := range tests {
			d := sim.NewDisk(uint64(i))
			topic := fmt.Sprintf("t%d", i)
			d.MkdirAll(path.Join(topicsDir, topic, "p00000"))
			for _, old := range []bool{true, false} {
				for _, s := range tc.segs {
					if s.old == old {
						writeSegment(t, d, topic, 0, s.base, s.size)
					}
				}
				if old {
					advance(2 * time.Hour)
				}
			}
			got, err := expiredOnDisk(d, path.Join(topicsDir, topic, "p00000"), bounds{maxAge: time.Hour}, time.Now())
			if err != nil || got != tc.want {
				t.Errorf("%s: expired = %v, %v; want %v", tc.name, got, err, tc.want)
			}
		}
	})
}

// The walk sweeps a closed partition whose segments hold more than its
// topic's byte bound, with a sealed segment to delete; one within it, or
// with only its active segment, is left alone.
func TestWalk_SweepsPartitionsOverTheirByteBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(1)
		node := newFakeNode()
		node.retention["sized"] = 0
		node.maxBytes["sized"] = 250
		writeSegment(t, d, "sized", 0, 0, 200) // p0: 200 + 100 bytes, over the bound
		writeSegment(t, d, "sized", 0, 10, 100)
		writeSegment(t, d, "sized", 1, 0, 100) // p1: 100 + 100, within it
		writeSegment(t, d, "sized", 1, 10, 100)
		writeSegment(t, d, "sized", 2, 0, 400) // p2: only an active segment, over it: never deleted
		w := startWalk(t, d, node)
		advance(DefaultInterval)
		if got := w.node.takeSwept(); !slices.Equal(got, []string{"sized/0"}) {
			t.Fatalf("swept %v, want [sized/0]", got)
		}
	})
}
