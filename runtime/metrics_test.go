package runtime

import (
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// startNodeWithRegistry is startNode with the node's metrics in reg.
func startNodeWithRegistry(t *testing.T, d *sim.Disk, reg *prometheus.Registry) *testNode {
	t.Helper()
	return startNode(t, d, Config{Registerer: reg})
}

// series lists the registry's series of one metric, one line each:
// "label=value ... value", sorted as the registry gathers them.
func series(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				b.WriteString(lp.GetName() + "=" + lp.GetValue() + " ")
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64) + "\n")
		}
	}
	return b.String()
}

// TestMetrics_TopicCounters: a topic's produce and fetch counters exist
// from its creation at zero, count records and their key and value bytes,
// and go with the topic.
func TestMetrics_TopicCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := startNodeWithRegistry(t, newTestDisk(t, 1), reg)
	n.CreateTopic(bg, "orders", 1, Retention{})
	if got := series(t, reg, "narad_topic_produced_records_total"); got != "topic=orders 0\n" {
		t.Fatalf("before any produce: %q", got)
	}
	recs := recs("orders", 0, 0, 3) // keys "orders", values "orders/0/N"
	if _, err := n.Produce(bg, "orders", 0, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := n.AppendCommit(bg, "orders", 0, recs[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Read(bg, "orders", 0, 1, 10, 1<<20); err != nil {
		t.Fatal(err)
	}
	perRecord := len("orders") + len("orders/0/0")
	for name, want := range map[string]int{
		"narad_topic_produced_records_total": 4, "narad_topic_produced_bytes_total": 4 * perRecord,
		"narad_topic_fetched_records_total": 3, "narad_topic_fetched_bytes_total": 3 * perRecord,
	} {
		if got := series(t, reg, name); got != "topic=orders "+strconv.Itoa(want)+"\n" {
			t.Errorf("%s: %q, want %d", name, got, want)
		}
	}
	if err := n.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "narad_topic_produced_records_total"); got != "" {
		t.Fatalf("a deleted topic's series remain: %q", got)
	}
}

// TestMetrics_HighWatermarkGaugeNeverOpensALog: the per-partition gauge
// answers from an open log, and from what a closed one's close left,
// without opening it; a recreated topic never shows the deleted one's
// boundary.
func TestMetrics_HighWatermarkGaugeNeverOpensALog(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := startNodeWithRegistry(t, newTestDisk(t, 1), reg)
	n.CreateTopic(bg, "orders", 2, Retention{})
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 7))
	n.Produce(bg, "orders", 1, recs("orders", 1, 0, 2))
	const both = "partition=0 topic=orders 7\npartition=1 topic=orders 2\n"
	if got := series(t, reg, "narad_partition_high_watermark"); got != both {
		t.Fatalf("open logs: %q", got)
	}
	if err := n.reg.CloseLive(key("orders", 0)); err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "narad_partition_high_watermark"); got != both {
		t.Fatalf("one log closed: %q", got)
	}
	if _, ok := n.reg.Lookup(key("orders", 0)); ok {
		t.Fatal("a scrape opened the closed log")
	}
	if err := n.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "narad_partition_high_watermark"); got != "" {
		t.Fatalf("a deleted topic's partitions: %q", got)
	}
	n.CreateTopic(bg, "orders", 2, Retention{})
	if got := series(t, reg, "narad_partition_high_watermark"); got != "" {
		t.Fatalf("a recreated topic, never opened, shows %q", got)
	}
	n.Produce(bg, "orders", 0, recs("orders", 0, 0, 1))
	if got := series(t, reg, "narad_partition_high_watermark"); got != "partition=0 topic=orders 1\n" {
		t.Fatalf("a recreated topic: %q", got)
	}
}

// TestMetrics_ColdSweepKeepsTheGauge: the cold retention walk opens and
// closes a closed partition around the registry; its gauge stays (found
// by review: the sweep's open dropped the closed mark and its close kept
// none, so idle partitions lost their series every walk).
func TestMetrics_ColdSweepKeepsTheGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := startNodeWithRegistry(t, newTestDisk(t, 1), reg)
	n.CreateTopic(bg, "orders", 1, Retention{})
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 7)); err != nil {
		t.Fatal(err)
	}
	if err := n.reg.CloseLive(key("orders", 0)); err != nil { // idle eviction
		t.Fatal(err)
	}
	const want = "partition=0 topic=orders 7\n"
	if _, err := (coldNode{n.Node}).SweepCold(bg, "orders", 0); err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "narad_partition_high_watermark"); got != want {
		t.Fatalf("after a cold retention sweep: %q, want %q", got, want)
	}
}

// TestMetrics_ADeletedTopicsCountersNeverComeBack: a produce in flight
// when its topic is deleted counts nothing once the series are gone (found
// by review: it made them again, one leak per raced delete, and the
// recreated topic started above zero).
func TestMetrics_ADeletedTopicsCountersNeverComeBack(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := startNodeWithRegistry(t, newTestDisk(t, 1), reg)
	for round := range 200 {
		n.CreateTopic(bg, "orders", 1, Retention{})
		if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 1)); err != nil {
					return
				}
			}
		}()
		if err := n.DeleteTopic(bg, "orders"); err != nil {
			t.Fatal(err)
		}
		<-done
		if got := series(t, reg, "narad_topic_produced_records_total"); got != "" {
			t.Fatalf("round %d: the deleted topic's series is back: %q", round, got)
		}
	}
}

// TestMetrics_TwoNodesShareOneRegisterer: two nodes on one registerer
// start (no panic: they share its collectors), count into the same
// series, and the high watermark gauge covers both; a closed node leaves
// it.
func TestMetrics_TwoNodesShareOneRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := startNodeWithRegistry(t, newTestDisk(t, 1), reg)
	b := startNodeWithRegistry(t, newTestDisk(t, 2), reg)
	a.CreateTopic(bg, "left", 1, Retention{})
	b.CreateTopic(bg, "right", 1, Retention{})
	a.Produce(bg, "left", 0, recs("left", 0, 0, 3))
	b.Produce(bg, "right", 0, recs("right", 0, 0, 5))
	if got := series(t, reg, "narad_partition_high_watermark"); got != "partition=0 topic=left 3\npartition=0 topic=right 5\n" {
		t.Fatalf("the gauge over two nodes: %q", got)
	}
	if got := series(t, reg, "narad_storage_written_records_total"); got != "8\n" {
		t.Fatalf("written records over two nodes: %q", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "narad_partition_high_watermark"); got != "partition=0 topic=left 3\n" {
		t.Fatalf("after one node closed: %q", got)
	}
}

// TestMetrics_TwoNodesWithOneTopicName: two nodes on one registerer that
// both hold "orders" scrape cleanly (found by review: the gauge's
// duplicate series failed every scrape), and one node deleting its
// "orders" leaves the other's counters alone (found by review: it wiped
// them, and they restarted from zero).
func TestMetrics_TwoNodesWithOneTopicName(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := startNodeWithRegistry(t, newTestDisk(t, 1), reg)
	b := startNodeWithRegistry(t, newTestDisk(t, 2), reg)
	for _, n := range []*testNode{a, b} {
		n.CreateTopic(bg, "orders", 1, Retention{})
	}
	a.Produce(bg, "orders", 0, recs("orders", 0, 0, 3))
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("a scrape of two nodes holding one topic name: %v", err)
	}
	if err := b.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "narad_topic_produced_records_total"); got != "topic=orders 3\n" {
		t.Fatalf("after the other node deleted its orders: %q", got)
	}
	a.Produce(bg, "orders", 0, recs("orders", 0, 3, 1))
	if got := series(t, reg, "narad_topic_produced_records_total"); got != "topic=orders 4\n" {
		t.Fatalf("after one more produce: %q", got)
	}
	if err := a.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "narad_topic_produced_records_total"); got != "" {
		t.Fatalf("after both deleted it: %q", got)
	}
}

// TestNew_DefaultMetastoreLogsWhatItRecovered: a node that opens the
// embedded metastore itself says, at error, when it served a damaged
// file's copy (found by review: only the daemon said so).
func TestNew_DefaultMetastoreLogsWhatItRecovered(t *testing.T) {
	d := newTestDisk(t, 3)
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ms.CreateTopic(bg, "orders", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Damage(path.Join(dataDir, metastoreFile), 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.ErrorLevel)
	n, err := New(Config{DataDir: dataDir, FS: d, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if logs.FilterMessageSnippet("metastore").Len() != 1 {
		t.Fatalf("logged %v; want the metastore's recovery at error", logs.All())
	}
}

// TestNew_APanicOnAConflictingRegistererKeepsNoLock: a registerer holding
// another metric of one of the node's names makes New panic, before it
// takes the data directory's lock (found by review: the lock stayed held).
func TestNew_APanicOnAConflictingRegistererKeepsNoLock(t *testing.T) {
	d := newTestDisk(t, 4)
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "narad_storage_open_logs", Help: "something else"}))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("New took a conflicting registerer without a panic")
			}
		}()
		New(Config{DataDir: dataDir, FS: d, Registerer: reg})
	}()
	n, err := New(Config{DataDir: dataDir, FS: d})
	if err != nil {
		t.Fatalf("the next New on the directory: %v", err)
	}
	n.Close()
}

// TestMetrics_ByTopicSumsThePartitionGauges: with MetricsByTopic the
// per-partition gauges (high watermark, consumer lag and leased, cursor
// lag) are gone from a scrape, and their sums per topic (and cursor)
// stand in their place, so a scrape grows with topics, not partitions.
func TestMetrics_ByTopicSumsThePartitionGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := startNode(t, nil, Config{Registerer: reg, MetricsByTopic: true})
	makeTopic(t, n, "jobs", 3, 10) // 10 records in each partition
	for p, leased := range []int{4, 1, 0} {
		if leased == 0 {
			continue
		}
		if _, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: p, MaxRecords: leased, Lease: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Ack(bg, "jobs", 0, 0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateCursor(bg, "jobs", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	for p, read := range []int{3, 5} {
		if _, err := n.ReadCursor(bg, "jobs", "audit", p, read, 1<<20, true); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{
		"narad_partition_high_watermark": "",
		"narad_consumer_lag":             "",
		"narad_consumer_leased":          "",
		"narad_cursor_lag":               "",
		"narad_topic_appended_records":   "topic=jobs 30\n",
		// Partition 0: 10 less 2 acked; 1: 10; 2 has no consumer state.
		"narad_topic_consumer_lag":    "topic=jobs 18\n",
		"narad_topic_consumer_leased": "topic=jobs 3\n", // 2 of p0's 4 left, p1's one
		// 7 and 5 left in p0 and p1, all 10 of p2's.
		"narad_topic_cursor_lag": "cursor=audit topic=jobs 22\n",
	} {
		if got := series(t, reg, name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
