package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// "Retention": a log not reopened since a restart (here its startup open
// failed once) keeps its expired segments only until the first walk; the
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
		d.Inject(sim.Fault{Op: sim.OpReadDir, Path: partitionPath("cold", 0), Nth: 1, Err: syscall.EIO})
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

// A retention change made elsewhere (ms.SetRetention, as another node's
// change reaches this node's replica) reaches an open, idle log in place
// within the change feed's recheck: the log stays open, the reaper's pass
// it asks for deletes under the new bound, and the active segment's roll
// age follows it.
func TestRetention_ChangeThroughTheMetastoreReachesOpenIdleLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startRetentionNode(t, nil, Config{IdleEvictAfter: 24 * time.Hour})
		n.CreateTopic(bg, "orders", 1, Retention{}) // kept forever
		n.Produce(bg, "orders", 0, recs("orders", 0, 0, 5))
		before, _ := n.reg.Lookup(key("orders", 0))
		advanceBy(3 * time.Hour)
		if start, _ := startOffset(t, n, "orders", 0); start != 0 {
			t.Fatal("a log without retention lost records")
		}

		if _, err := n.ms.SetRetention(bg, "orders", Retention{Ms: time.Hour.Milliseconds()}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the change feed's recheck, and the reaper's pass it asks for
		after, _ := n.reg.Lookup(key("orders", 0))
		if after != before {
			t.Fatal("the log was reopened, not changed in place")
		}
		if start, hwm := startOffset(t, n, "orders", 0); start != 5 || hwm != 5 {
			t.Fatalf("start %d, high watermark %d after the change; want 5, 5", start, hwm)
		}

		// The roll age follows: a record every 10 minutes now rolls the
		// segment at the first write an hour after its oldest record.
		segments := len(segmentsOf(t, n.disk, "orders", 0))
		for i := range 7 {
			if i > 0 {
				advanceBy(10 * time.Minute)
			}
			n.Produce(bg, "orders", 0, recs("orders", 0, 10+i, 1))
		}
		if got := len(segmentsOf(t, n.disk, "orders", 0)); got != segments+1 {
			t.Fatalf("%d segments after an hour of trickle under a one-hour bound, want %d: the roll age did not follow", got, segments+1)
		}
	})
}

// "Retention", by size, through a node: a byte bound set on a topic in
// place reaches its open log (the reaper's next pass deletes its oldest
// segments past the bound) and its closed partitions (the cold walk
// sweeps them); the active segment always stays.
func TestRetention_ByteBoundReachesOpenAndClosedPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startRetentionNode(t, nil, Config{IdleEvictAfter: 24 * time.Hour, ColdWalkInterval: 5 * time.Minute})
		n.CreateTopic(bg, "sized", 2, Retention{}) // no bound yet
		for i := range 40 {
			for p := range 2 {
				n.Produce(bg, "sized", p, recs("sized", p, i*10, 10))
			}
		}
		if err := n.reg.CloseLive(key("sized", 1)); err != nil { // partition 1 closed, as idle eviction leaves it
			t.Fatal(err)
		}
		before := len(segmentsOf(t, n.disk, "sized", 0))
		if before < 4 {
			t.Fatalf("only %d segments to work with", before)
		}
		const bound = 8 << 10 // two 4 KiB segments' worth
		if _, err := n.ms.SetRetention(bg, "sized", Retention{Bytes: bound}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()            // the change feed's recheck reaches the open log
		advanceBy(5 * time.Minute) // the reaper's passes and a cold walk
		if _, open := n.reg.Lookup(key("sized", 1)); open {
			t.Fatal("partition 1 was opened: the cold walk's sweep must leave it closed")
		}
		for p := range 2 {
			segs := segmentsOf(t, n.disk, "sized", p)
			var held int64
			for _, s := range segs {
				fi, err := n.disk.Stat(path.Join(partitionPath("sized", p), s))
				if err != nil {
					t.Fatal(err)
				}
				held += fi.Size
			}
			if held > bound && len(segs) > 1 {
				t.Fatalf("partition %d holds %d bytes in %d segments, over the %d-byte bound", p, held, len(segs), bound)
			}
			if len(segs) >= before {
				t.Fatalf("partition %d still has %d segments of %d", p, len(segs), before)
			}
		}
		for p := range 2 {
			start, hwm := startOffset(t, n, "sized", p)
			if start == 0 || hwm != 400 {
				t.Fatalf("partition %d: start %d, high watermark %d; want the oldest records gone, 400", p, start, hwm)
			}
		}
	})
}

// A retention change reaches an open log that nobody writes to
// afterwards and is applied at once (docs/http-api.md, PATCH): the bounds
// are set in place and the reaper sweeps right away, not at its next
// interval, whether the change is this node's own (Node.SetRetention) or
// another's arriving through the metastore's change feed. The clock does
// not move after the change. Found by review: the node that ran a change
// closed the topic's open logs, so nothing swept them until a produce
// reopened them, and a change from the feed waited for the next pass.
func TestRetention_ChangeAppliedAtOnceToAnOpenLogNobodyWrites(t *testing.T) {
	const sizeBound = 8 << 10 // two 4 KiB segments' worth
	bounds := []struct {
		name      string
		retention Retention
	}{
		{"by time", Retention{Ms: time.Hour.Milliseconds()}},
		{"by size", Retention{Bytes: sizeBound}},
	}
	changes := []struct {
		name   string
		change func(n *retentionNode, r Retention) error
	}{
		{"by this node", func(n *retentionNode, r Retention) error {
			_, err := n.SetRetention(bg, "orders", r)
			return err
		}},
		{"through the change feed", func(n *retentionNode, r Retention) error {
			_, err := n.ms.SetRetention(bg, "orders", r)
			return err
		}},
	}
	for _, b := range bounds {
		for _, c := range changes {
			t.Run(b.name+"/"+c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					n := startRetentionNode(t, nil, Config{IdleEvictAfter: 24 * time.Hour})
					if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil { // no bound yet
						t.Fatal(err)
					}
					for i := range 40 {
						if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, i*10, 10)); err != nil {
							t.Fatal(err)
						}
					}
					segments := len(segmentsOf(t, n.disk, "orders", 0))
					if segments < 4 {
						t.Fatalf("only %d segments to work with", segments)
					}
					advanceBy(3 * time.Hour) // the records are old now; the reaper ran many passes
					before, _ := n.reg.Lookup(key("orders", 0))

					if err := c.change(n, b.retention); err != nil {
						t.Fatal(err)
					}
					synctest.Wait() // whatever the change started; the clock stays

					if after, open := n.reg.Lookup(key("orders", 0)); !open || after != before {
						t.Fatalf("open %v, same log %v after the change: want the log changed in place", open, after == before)
					}
					start, hwm := startOffset(t, n, "orders", 0)
					left := segmentsOf(t, n.disk, "orders", 0)
					if hwm != 400 || start == 0 || len(left) >= segments {
						t.Fatalf("start %d, high watermark %d, %d of %d segments right after the change: not applied", start, hwm, len(left), segments)
					}
					if b.retention.Ms > 0 && start != 400 {
						t.Fatalf("start %d under an age bound every record is past: want 400", start)
					}
					var held int64
					for _, s := range left {
						fi, err := n.disk.Stat(path.Join(partitionPath("orders", 0), s))
						if err != nil {
							t.Fatal(err)
						}
						held += fi.Size
					}
					if b.retention.Bytes > 0 && held > sizeBound && len(left) > 1 {
						t.Fatalf("%d bytes in %d segments, over the %d-byte bound", held, len(left), sizeBound)
					}
				})
			})
		}
	}
}

// TestRetention_AChangeThatKeepsTheBoundsStartsNoPass: only a change that
// moves an open log's bounds asks the reaper for a pass at once; another
// change of the topic's record (its create, a change to the bounds it
// has) leaves the log to the reaper's interval. Found when every create's
// recheck started a pass, and a test that needed a log to stay expired
// until it evicted found it swept.
func TestRetention_AChangeThatKeepsTheBoundsStartsNoPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startRetentionNode(t, nil, Config{IdleEvictAfter: 24 * time.Hour, ReaperInterval: 24 * time.Hour})
		bound := Retention{Ms: time.Hour.Milliseconds()}
		if _, _, err := n.CreateTopic(bg, "orders", 1, bound); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 5)); err != nil {
			t.Fatal(err)
		}
		advanceBy(2 * time.Hour)
		l, _ := n.reg.Lookup(key("orders", 0))
		if ok, err := l.Expired(bg); !ok || err != nil {
			t.Fatalf("Expired = %v, %v two hours past an hour's bound", ok, err)
		}
		for _, change := range []func() error{
			func() error { _, err := n.SetRetention(bg, "orders", bound); return err },
			func() error { _, err := n.ms.SetRetention(bg, "orders", bound); return err },
		} {
			if err := change(); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if ok, err := l.Expired(bg); !ok || err != nil {
				t.Fatalf("Expired = %v, %v after a change that kept the bounds: a pass ran", ok, err)
			}
		}
	})
}

// TestDescribe_ASegmentRetentionUnlinksMidListingIsLeftOut: a sweep of an
// open log unlinks segments without the topic's guard, so a describe may
// list a segment and find it gone when it stats it; it leaves it out, as
// deleted, rather than failing. Found when a retention change's sweep
// (which now runs at once) met the describe its PATCH answers with: 500
// internal, "stat ...log: no such file or directory".
func TestDescribe_ASegmentRetentionUnlinksMidListingIsLeftOut(t *testing.T) {
	n := startNode(t, nil, Config{})
	if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, i*10, 10)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := n.Log(bg, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.SetRetention(bg, 0, 8<<10); err != nil { // in the log alone: no reaper pass races the test's
		t.Fatal(err)
	}
	oldest := path.Join(partitionPath("orders", 0), segmentsOf(t, n.disk, "orders", 0)[0])
	var once sync.Once
	swept := make(chan partition.SweepResult, 1)
	n.disk.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpStat && c.Path == oldest {
			once.Do(func() { // the sweep unlinks between the describe's listing and its stat
				res, err := l.Sweep(bg)
				if err != nil {
					t.Errorf("sweep: %v", err)
				}
				swept <- res
			})
		}
		return nil
	})
	_, infos, err := n.Describe(bg, "orders")
	n.disk.SetHook(nil)
	if err != nil {
		t.Fatalf("describe while a sweep unlinks: %v", err)
	}
	res := <-swept
	if res.DeletedSegments == 0 {
		t.Fatal("the sweep deleted nothing: the race was not met")
	}
	left := len(segmentsOf(t, n.disk, "orders", 0))
	if p := infos[0]; p.Segments != left || p.StartOffset != l.StartOffset() || p.HighWatermark != 400 {
		t.Fatalf("described %+v; want the %d segments left, start %d, high watermark 400", p, left, l.StartOffset())
	}
}

// TestRetention_AnAgeBoundNoDurationHoldsIsRefusedOrHeldAtTheLongest: an
// age bound past MaxRetentionMs wrapped when made a duration
// (18446744073710 ms became 448 us, and the sweep deleted every sealed
// segment; found by review). Create and change refuse it; a record
// holding one from before the bound was checked keeps the longest age
// a duration holds, never a wrapped one.
func TestRetention_AnAgeBoundNoDurationHoldsIsRefusedOrHeldAtTheLongest(t *testing.T) {
	n := startNode(t, nil, Config{})
	for _, ms := range []int64{MaxRetentionMs + 1, 18446744073710} {
		if _, _, err := n.CreateTopic(bg, "t", 1, Retention{Ms: ms}); err == nil {
			t.Fatalf("created a topic with an age bound of %d ms", ms)
		}
	}
	if _, _, err := n.CreateTopic(bg, "t", 1, Retention{Ms: MaxRetentionMs}); err != nil {
		t.Fatalf("the longest age bound: %v", err)
	}
	if _, err := n.SetRetention(bg, "t", Retention{Ms: MaxRetentionMs + 1}); !errors.Is(err, ErrBadRetention) {
		t.Fatalf("a change past the longest age bound: %v, want ErrBadRetention", err)
	}
	longest := time.Duration(MaxRetentionMs) * time.Millisecond
	for _, ms := range []int64{MaxRetentionMs, MaxRetentionMs + 1, 18446744073710, math.MaxInt64} {
		if got := (Retention{Ms: ms}).maxAge(); got != longest {
			t.Fatalf("the age bound of %d ms: %v, want %v", ms, got, longest)
		}
	}
}

// TestRetention_AChangeDuringStartupIsAppliedOnceTheReaperStarts: a
// retention change that reaches an open log while the node is still
// starting (the change feed runs from Start's beginning; the reaper
// starts at its end) is applied when the reaper starts, not a whole
// ReaperInterval later: the reaper that was not there to ask is asked
// then.
func TestRetention_AChangeDuringStartupIsAppliedOnceTheReaperStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := sim.NewDisk(1)
		if err := d.MkdirAll(dataDir); err != nil {
			t.Fatal(err)
		}
		ms, err := OpenLocalMetastore(d, dataDir)
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(Config{DataDir: dataDir, FS: d, Metastore: ms, SegmentMaxBytes: 4 << 10, IdleEvictAfter: 24 * time.Hour, Testing: checkLockOrder})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := n.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if v := n.LockOrderViolations(); len(v) > 0 {
				t.Errorf("lock-order violations: %v", v)
			}
		}()
		if _, _, err := n.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, i*10, 10)); err != nil {
				t.Fatal(err)
			}
		}
		advanceBy(3 * time.Hour) // the records are old now

		topics := path.Join(dataDir, wire.TopicsDirName)
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpReadDir && c.Path == topics {
				once.Do(func() {
					close(entered)
					<-release // Start, past its subscription, before its loops
				})
			}
			return nil
		})
		started := make(chan error, 1)
		go func() { started <- n.Start(bg) }()
		<-entered
		if _, err := ms.SetRetention(bg, "orders", Retention{Ms: time.Hour.Milliseconds()}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the change feed's recheck sets the bound in place
		close(release)
		if err := <-started; err != nil {
			t.Fatal(err)
		}
		d.SetHook(nil)
		synctest.Wait() // whatever Start started; the clock stays
		l, ok := n.reg.Lookup(key("orders", 0))
		if !ok || l.StartOffset() != 400 {
			t.Fatalf("open %v, start offset %d once the node started: want 400, every record past the new bound", ok, l.StartOffset())
		}
	})
}
