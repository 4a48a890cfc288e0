package runtime

import (
	"context"
	"fmt"
	"path"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Tests of docs/design.md, "Retention", through a node: the reaper
// over open logs, the cold walk over closed ones, retention changes in
// place, and eviction's rule. Every one runs in a synctest bubble, with
// the simulated disk made inside it so its modification times read the
// bubble's clock.

// advanceBy moves the bubble's clock forward by d, then waits until every
// goroutine in it is blocked again.
func advanceBy(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

// testMetastore is the embedded metastore as a node of a cluster might see
// its replica: some partitions assigned elsewhere, and behind the leader
// at times.
type testMetastore struct {
	*LocalMetastore
	mu      sync.Mutex
	foreign map[supervisor.Key]bool
	behind  bool
	// onCaughtUp runs at every CaughtUp, which the walk asks right
	// before it sweeps a partition it found expired.
	onCaughtUp func()
}

func (m *testMetastore) Assigned(ctx context.Context, topic string, p int) (bool, error) {
	m.mu.Lock()
	foreign := m.foreign[key(topic, p)]
	m.mu.Unlock()
	if foreign {
		return false, nil
	}
	return m.LocalMetastore.Assigned(ctx, topic, p)
}

func (m *testMetastore) CaughtUp() bool {
	m.mu.Lock()
	behind, hook := m.behind, m.onCaughtUp
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
	return !behind
}

func (m *testMetastore) set(f func(*testMetastore)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

type retentionNode struct {
	*testNode
	wrapped *testMetastore
	metrics *prometheus.Registry
	logs    *observer.ObservedLogs
}

// startRetentionNode starts a node over d (a new disk if nil) with 4 KiB
// segments, the lock-order checker on, a metrics registry and observed
// logs; it is closed, and checked for lock-order violations, at the end.
func startRetentionNode(t *testing.T, d *sim.Disk, cfg Config) *retentionNode {
	t.Helper()
	if d == nil {
		d = sim.NewDisk(1)
		if err := d.MkdirAll(dataDir); err != nil {
			t.Fatal(err)
		}
	}
	cfg.DataDir, cfg.FS, cfg.Testing = dataDir, d, checkLockOrder
	if cfg.SegmentMaxBytes == 0 {
		cfg.SegmentMaxBytes = 4 << 10
	}
	local, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	ms := &testMetastore{LocalMetastore: local, foreign: map[supervisor.Key]bool{}}
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	cfg.Metastore, cfg.Logger, cfg.Registerer = ms, zap.New(core), reg
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if v := n.LockOrderViolations(); len(v) > 0 {
			t.Errorf("lock-order violations: %v", v)
		}
	})
	return &retentionNode{testNode: &testNode{Node: n, disk: d, ms: local}, wrapped: ms, metrics: reg, logs: logs}
}

// metric is a counter's value in the node's registry.
func (n *retentionNode) metric(t *testing.T, name string) float64 {
	t.Helper()
	families, err := n.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			total := 0.0
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
			return total
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

func partitionPath(topic string, p int) string {
	name, _ := wire.PartitionDirName(p)
	return path.Join(dataDir, "topics", topic, name)
}

// segmentsOf lists a partition's segment files.
func segmentsOf(t *testing.T, d *sim.Disk, topic string, p int) []string {
	t.Helper()
	entries, err := d.ReadDir(partitionPath(topic, p))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, err := wire.ParseSegmentFileName(e.Name); err == nil {
			out = append(out, e.Name)
		}
	}
	return out
}

// startOffset answers a partition's start offset without opening it or
// touching its last use.
func startOffset(t *testing.T, n *retentionNode, topic string, p int) (start, hwm int64) {
	t.Helper()
	_, infos, err := n.Describe(bg, topic)
	if err != nil {
		t.Fatal(err)
	}
	return infos[p].StartOffset, infos[p].HighWatermark
}

// produced remembers when each offset was written.
type produced struct {
	topic string
	at    map[int64]time.Time
}

func (w *produced) produce(t *testing.T, n *retentionNode, count, size int) {
	t.Helper()
	rs := make([]partition.Record, count)
	for i := range rs {
		rs[i] = partition.Record{Value: fmt.Appendf(nil, "%-*d", size, len(w.at)+i)}
	}
	base, err := n.Produce(bg, w.topic, 0, rs)
	if err != nil {
		t.Fatalf("produce %s: %v", w.topic, err)
	}
	for i := range rs {
		w.at[base+int64(i)] = time.Now()
	}
}

// checkLifetime fails if a record older than bound is still held, or one
// no older than maxAge is gone.
func (w *produced) checkLifetime(t *testing.T, n *retentionNode, maxAge, bound time.Duration) {
	t.Helper()
	start, _ := startOffset(t, n, w.topic, 0)
	now := time.Now()
	for offset, at := range w.at {
		switch age := now.Sub(at); {
		case age > bound && offset >= start:
			t.Fatalf("%s: record %d is %v old and still held (start offset %d); the bound is %v", w.topic, offset, age, start, bound)
		case age <= maxAge && offset < start:
			t.Fatalf("%s: record %d is %v old and deleted (start offset %d); retention is %v", w.topic, offset, age, start, maxAge)
		}
	}
}

// "Retention": with the reaper running, a record of an open log lives at
// most MaxSegmentAge + MaxAge + the sweep interval (MaxSegmentAge being the
// retention here), and nothing younger than the retention is deleted: a
// busy log (segments roll on size), a trickle log (one tiny record every
// 10 minutes: segments roll on age) and an idle log (written for half an
// hour, then never: its active segment is rotated), over four hours.
func TestRetention_RecordLifetimeInOpenLogsThroughTheReaper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxAge = time.Hour
		const bound = maxAge + maxAge + time.Minute
		n := startRetentionNode(t, nil, Config{IdleEvictAfter: 24 * time.Hour})
		logs := map[string]*produced{}
		for _, topic := range []string{"busy", "trickle", "idle"} {
			if _, _, err := n.CreateTopic(bg, topic, 1, Retention{Ms: maxAge.Milliseconds()}); err != nil {
				t.Fatal(err)
			}
			logs[topic] = &produced{topic: topic, at: map[int64]time.Time{}}
		}
		for minute := range 240 {
			if minute > 0 {
				advanceBy(time.Minute)
			}
			logs["busy"].produce(t, n, 10, 200)
			if minute%10 == 0 {
				logs["trickle"].produce(t, n, 1, 10)
			}
			if minute < 30 {
				logs["idle"].produce(t, n, 1, 10)
			}
			for _, w := range logs {
				w.checkLifetime(t, n, maxAge, bound)
			}
		}
		for topic := range logs {
			if start, _ := startOffset(t, n, topic, 0); start == 0 {
				t.Fatalf("%s: four hours with a one-hour retention deleted nothing", topic)
			}
			if _, ok := n.reg.Lookup(key(topic, 0)); !ok {
				t.Fatalf("%s: closed; this test is about open logs", topic)
			}
		}
		if start, hwm := startOffset(t, n, "idle", 0); start != hwm {
			t.Fatalf("idle log: start %d, high watermark %d: its idle active segment was not rotated away", start, hwm)
		}
		if len(segmentsOf(t, n.disk, "trickle", 0)) > 4 {
			t.Fatalf("trickle log holds %v", segmentsOf(t, n.disk, "trickle", 0))
		}
	})
}

// "Retention": a log closed by idle eviction is swept by the cold walk: its
// records live at most MaxSegmentAge + MaxAge + the walk interval, it ends
// holding nothing once all expired, and the walk never leaves it open.
func TestRetention_ClosedLogSweptByTheColdWalk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxAge = time.Hour
		const walk = 5 * time.Minute
		const bound = maxAge + maxAge + walk
		n := startRetentionNode(t, nil, Config{ColdWalkInterval: walk})
		n.CreateTopic(bg, "orders", 1, Retention{Ms: maxAge.Milliseconds()})
		w := &produced{topic: "orders", at: map[int64]time.Time{}}
		lastWrite := time.Now()
		for minute := range 240 {
			if minute > 0 {
				advanceBy(time.Minute)
			}
			if minute < 20 {
				w.produce(t, n, 10, 200)
				lastWrite = time.Now()
			}
			w.checkLifetime(t, n, maxAge, bound)
			if minute == 60 {
				if _, ok := n.reg.Lookup(key("orders", 0)); ok {
					t.Fatal("still open 40 idle minutes after its last use")
				}
			}
			if time.Since(lastWrite) > maxAge+walk {
				if start, hwm := startOffset(t, n, "orders", 0); start != hwm {
					t.Fatalf("minute %d: start %d, high watermark %d: everything expired a walk ago", minute, start, hwm)
				}
				if _, ok := n.reg.Lookup(key("orders", 0)); ok {
					t.Fatal("the cold walk left the log open")
				}
			}
		}
		if got := n.metric(t, "narad_cold_retention_swept_total"); got < 1 {
			t.Fatalf("swept_total = %v", got)
		}
		if got := segmentsOf(t, n.disk, "orders", 0); len(got) != 1 {
			t.Fatalf("segments %v left, want the empty active one", got)
		}
	})
}

// "Retention": a log not reopened since a restart (here its startup
// check and the open that followed failed once each) keeps its expired segments only until the first walk; the
// log that did open is the reaper's, at its first pass.
func TestRetention_LogNotReopenedSinceRestartSweptByTheColdWalk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(7)
		d.MkdirAll(dataDir)
		func() {
			first := startRetentionNode(t, d, Config{})
			for _, topic := range []string{"live", "cold"} {
				first.CreateTopic(bg, topic, 1, Retention{Ms: time.Hour.Milliseconds()})
				w := &produced{topic: topic, at: map[int64]time.Time{}}
				for range 40 {
					w.produce(t, first, 10, 200)
				}
			}
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
		}()
		if got := len(segmentsOf(t, d, "cold", 0)); got < 5 {
			t.Fatalf("only %d segments laid out", got)
		}
		advanceBy(3 * time.Hour) // the node is down; everything expires
		// Two faults, each failing one listing: startup's check, then its open.
		for range 2 {
			d.Inject(sim.Fault{Op: sim.OpReadDir, Path: partitionPath("cold", 0), Nth: 1, Err: syscall.EIO})
		}
		n := startRetentionNode(t, d, Config{ColdWalkInterval: 5 * time.Minute})
		if _, ok := n.reg.Lookup(key("cold", 0)); ok {
			t.Fatal("the injected fault did not keep the startup open out")
		}
		advanceBy(time.Minute) // the reaper's first pass
		if got := segmentsOf(t, d, "live", 0); len(got) != 1 {
			t.Fatalf("the reaper's first pass left %v in the open log", got)
		}
		if got := len(segmentsOf(t, d, "cold", 0)); got < 5 {
			t.Fatalf("the closed log lost segments before any walk: %d left", got)
		}
		advanceBy(4 * time.Minute) // the first walk
		if got := segmentsOf(t, d, "cold", 0); len(got) != 1 {
			t.Fatalf("the first walk after the restart left %v", got)
		}
		if start, hwm := startOffset(t, n, "cold", 0); start != hwm || hwm != 400 {
			t.Fatalf("cold log: start %d, high watermark %d; want 400, 400", start, hwm)
		}
		if _, ok := n.reg.Lookup(key("cold", 0)); ok {
			t.Fatal("the walk installed the log it swept")
		}
		if got := n.metric(t, "narad_cold_retention_swept_total"); got != 1 {
			t.Fatalf("swept_total = %v, want 1", got)
		}
	})
}

// closedExpired makes a node whose topic "orders" has partitions
// partitions, each with sealed and active segments, all closed, that the
// next walk (within 5 minutes) finds past their one-hour retention.
func closedExpired(t *testing.T, partitions int) *retentionNode {
	t.Helper()
	n := startRetentionNode(t, nil, Config{ColdWalkInterval: 5 * time.Minute})
	n.CreateTopic(bg, "orders", partitions, Retention{Ms: time.Hour.Milliseconds()})
	advanceBy(150 * time.Second) // write between two walks
	for p := range partitions {
		for i := range 30 {
			if _, err := n.Produce(bg, "orders", p, recs("orders", p, i*10, 10)); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.reg.CloseLive(key("orders", p)); err != nil {
			t.Fatal(err)
		}
		if len(segmentsOf(t, n.disk, "orders", p)) < 2 {
			t.Fatal("no sealed segment laid out")
		}
	}
	// Up to just before the first walk that finds them expired (at 65
	// minutes: the one at 60 does not, 2.5 minutes before the bound).
	advanceBy(time.Hour - 30*time.Second)
	for p := range partitions {
		if len(segmentsOf(t, n.disk, "orders", p)) < 2 {
			t.Fatal("a walk swept before the test began")
		}
	}
	return n
}

// The walk leaves alone a partition the local assignment gives another
// node, and runs only while the metadata replica is caught up.
func TestColdWalk_SkipsOtherNodesPartitionsAndRunsOnlyCaughtUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startRetentionNode(t, nil, Config{ColdWalkInterval: 5 * time.Minute})
		n.wrapped.set(func(m *testMetastore) { m.behind = true })
		n.CreateTopic(bg, "orders", 3, Retention{Ms: time.Hour.Milliseconds()})
		for p := range 3 {
			n.Produce(bg, "orders", p, recs("orders", p, 0, 50))
			n.reg.CloseLive(key("orders", p))
		}
		n.wrapped.set(func(m *testMetastore) { m.foreign[key("orders", 1)] = true })
		held := make([][]string, 3)
		for p := range 3 {
			held[p] = segmentsOf(t, n.disk, "orders", p)
		}
		advanceBy(3 * time.Hour) // 36 walks while behind the leader
		for p := range 3 {
			if got := segmentsOf(t, n.disk, "orders", p); len(got) != len(held[p]) {
				t.Fatalf("partition %d swept while the replica was behind: %v", p, got)
			}
		}
		n.wrapped.set(func(m *testMetastore) { m.behind = false })
		advanceBy(5 * time.Minute)
		for p := range 3 {
			got := segmentsOf(t, n.disk, "orders", p)
			if p == 1 && len(got) != len(held[1]) {
				t.Fatalf("another node's partition was swept: %v", got)
			}
			if p != 1 && len(got) != 1 {
				t.Fatalf("partition %d not swept once caught up: %v", p, got)
			}
		}
		if got := n.metric(t, "narad_cold_retention_swept_total"); got != 2 {
			t.Fatalf("swept_total = %v, want 2", got)
		}
	})
}

// A partition directory removed after the walk listed it and found it
// expired, before its sweep (a reclaim, say), is never recreated by the
// open: no empty partition at offset 0 appears. The removal is made at the
// last thing the walk asks before the sweep: whether the replica is caught
// up.
func TestColdWalk_PartitionRemovedBetweenListingAndOpenIsNotRecreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := closedExpired(t, 3)
		gone := partitionPath("orders", 1)
		var mu sync.Mutex
		listed, removed := false, false
		n.disk.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpStat && path.Dir(c.Path) == gone { // the walk stats its segments
				mu.Lock()
				listed = true
				mu.Unlock()
			}
			return nil
		})
		defer n.disk.SetHook(nil)
		n.wrapped.set(func(m *testMetastore) {
			m.onCaughtUp = func() {
				mu.Lock()
				defer mu.Unlock()
				if listed && !removed {
					removed = true
					if err := n.disk.RemoveAll(gone); err != nil {
						t.Errorf("remove: %v", err)
					}
				}
			}
		})
		advanceBy(5 * time.Minute)
		mu.Lock()
		if !removed {
			t.Fatal("the walk never stat'ed the partition: the test removed nothing")
		}
		mu.Unlock()
		if ok, _ := vfs.Exists(n.disk, gone); ok {
			t.Fatal("the removed partition directory was recreated")
		}
		for _, p := range []int{0, 2} {
			if got := segmentsOf(t, n.disk, "orders", p); len(got) != 1 {
				t.Fatalf("partition %d not swept: %v", p, got)
			}
		}
		if got := n.metric(t, "narad_cold_retention_swept_total"); got != 2 {
			t.Fatalf("swept_total = %v, want 2", got)
		}
		if got := n.logs.FilterLevelExact(zapcore.WarnLevel).Len(); got != 0 {
			t.Fatalf("a removed partition is skipped quietly: %v", n.logs.FilterLevelExact(zapcore.WarnLevel).All())
		}
	})
}

// A panic in one partition's cold sweep (an unlink, through a hook) is
// contained: logged with the partition, counted, the log closed, the other
// partitions swept, and the partition left alone for 30 minutes, then
// swept.
func TestColdWalk_PanicClosesTheLogAndLeavesThePartitionAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := closedExpired(t, 3)
		var mu sync.Mutex
		panicking, removes := true, 0
		n.disk.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpRemove && path.Dir(c.Path) == partitionPath("orders", 1) {
				mu.Lock()
				removes++
				boom := panicking
				mu.Unlock()
				if boom {
					panic("unlink exploded")
				}
			}
			return nil
		})
		defer n.disk.SetHook(nil)
		n.logs.TakeAll()

		advanceBy(5 * time.Minute)
		if got := n.metric(t, "narad_cold_retention_panics_total"); got != 1 {
			t.Fatalf("panics_total = %v, want 1", got)
		}
		entries := n.logs.FilterMessage("supervised loop recovered a panic").All()
		if len(entries) != 1 || entries[0].Level != zapcore.ErrorLevel || entries[0].ContextMap()["key"] != "orders/1" {
			t.Fatalf("panic log lines %v", entries)
		}
		if got := n.disk.OpenFiles(); got != 1 {
			t.Fatalf("%d files open after the walk, want only the data directory's lock: the panicking partition's log was not closed", got)
		}
		if n.reg.Len() != 0 {
			t.Fatal("a swept log was installed")
		}
		for _, p := range []int{0, 2} {
			if got := segmentsOf(t, n.disk, "orders", p); len(got) != 1 {
				t.Fatalf("partition %d not swept: %v", p, got)
			}
		}
		mu.Lock()
		panicking = false
		mu.Unlock()
		advanceBy(25 * time.Minute) // five walks
		mu.Lock()
		if removes != 1 {
			t.Fatalf("the partition was visited again within 30 minutes (%d unlinks)", removes)
		}
		mu.Unlock()
		advanceBy(5 * time.Minute) // 30 minutes after the panic
		if got := segmentsOf(t, n.disk, "orders", 1); len(got) != 1 {
			t.Fatalf("partition 1 not swept once left alone for 30 minutes: %v", got)
		}
	})
}

// Idle eviction: with the cold walk on, an idle retention log is closed
// whatever its segments (the walk reaps it closed); with it off, only
// once retention has nothing left to delete in it.
func TestEviction_RetentionLogsWithTheWalkOnAndOff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		walk   time.Duration
		closed int
	}{
		{"walk on", 5 * time.Minute, 2},
		{"walk off", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := startRetentionNode(t, nil, Config{IdleEvictAfter: time.Minute, ColdWalkInterval: tc.walk, ReaperInterval: 24 * time.Hour})
				n.CreateTopic(bg, "kept", 1, Retention{})
				n.CreateTopic(bg, "expiring", 1, Retention{Ms: 1}) // 1 ms retention
				n.Produce(bg, "kept", 0, recs("kept", 0, 0, 1))
				n.Produce(bg, "expiring", 0, recs("expiring", 0, 0, 1))
				advanceBy(time.Second)
				expiring, _ := n.reg.Lookup(key("expiring", 0))
				if ok, err := expiring.Expired(bg); !ok || err != nil {
					t.Fatalf("Expired = %v, %v", ok, err)
				}
				if got := n.EvictIdle(time.Now().Add(time.Hour)); got != tc.closed {
					t.Fatalf("evicted %d logs, want %d", got, tc.closed)
				}
				_, open := n.reg.Lookup(key("expiring", 0))
				if open != (tc.walk == 0) {
					t.Fatalf("the log with expired segments open = %v with the walk at %v", open, tc.walk)
				}
			})
		})
	}
}
