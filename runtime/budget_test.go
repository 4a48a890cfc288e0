package runtime

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"
)

// retryBusy runs fn until it answers something other than ErrBusy, as a
// client told to retry does, or gives up after many tries.
func retryBusy(fn func() error) error {
	for try := 0; ; try++ {
		err := fn()
		if !errors.Is(err, ErrBusy) || try == 10000 {
			return err
		}
	}
}

// TestBudget_MorePartitionsThanTheBudgetAcrossARestart: a node whose
// budget is a fifth of its partitions serves every produce, read and ack
// of all of them, never holds more logs open than its budget, closes the
// least recently used cleanly (nothing poisoned, every record and every
// ack kept), and across a restart recovers every partition at startup
// while keeping within the budget (docs/design.md, "Opening and closing
// logs").
func TestBudget_MorePartitionsThanTheBudgetAcrossARestart(t *testing.T) {
	const budget, partitions, rounds = 4, 20, 3
	d := newTestDisk(t, 1)
	reg := prometheus.NewRegistry()
	n := startNode(t, d, Config{MaxOpenLogs: budget, Registerer: reg})
	if _, _, err := n.CreateTopic(bg, "orders", partitions, Retention{}); err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		for p := range partitions {
			if _, err := n.Produce(bg, "orders", p, recs("orders", p, round*2, 2)); err != nil {
				t.Fatalf("produce %d/%d: %v", round, p, err)
			}
			if open := n.reg.Len(); open > budget {
				t.Fatalf("%d logs open, budget %d", open, budget)
			}
		}
		for p := range partitions {
			if _, err := n.Ack(bg, "orders", p, int64(round*2)); err != nil {
				t.Fatalf("ack %d/%d: %v", round, p, err)
			}
		}
	}
	if got := series(t, reg, "narad_storage_open_logs_limit"); got != fmt.Sprintf("%d\n", budget) {
		t.Fatalf("narad_storage_open_logs_limit: %q", got)
	}
	if got := series(t, reg, "narad_storage_frame_cache_limit_bytes"); got != fmt.Sprintf("%d\n", DefaultFrameCacheBytes) {
		t.Fatalf("narad_storage_frame_cache_limit_bytes: %q", got)
	}
	if got := series(t, reg, "narad_storage_open_log_budget_evictions_total"); got == "0\n" || got == "" {
		t.Fatalf("narad_storage_open_log_budget_evictions_total: %q after %d partitions through a budget of %d", got, partitions, budget)
	}
	check := func(n *testNode) {
		t.Helper()
		for p := range partitions {
			got := readValues(t, n, "orders", p)
			if len(got) != 2*rounds {
				t.Fatalf("partition %d: %d records, want %d", p, len(got), 2*rounds)
			}
			for i, v := range got {
				if want := fmt.Sprintf("orders/%d/%d", p, i); v != want {
					t.Fatalf("partition %d offset %d: %q, want %q", p, i, v, want)
				}
			}
			st, err := n.ConsumerState(bg, "orders", p)
			if err != nil || st.Frontier != 1 || len(st.AckedAhead) != rounds-1 {
				t.Fatalf("partition %d consumer state %+v, %v; want frontier 1 and %d acked ahead", p, st, err, rounds-1)
			}
			if open := n.reg.Len(); open > budget {
				t.Fatalf("%d logs open, budget %d", open, budget)
			}
		}
	}
	check(n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, d, Config{MaxOpenLogs: budget})
	if open := n.reg.Len(); open == 0 || open > budget {
		t.Fatalf("after startup %d logs open, want 1 to %d", open, budget)
	}
	if n.reg.Evictions() < partitions-budget {
		t.Fatalf("startup evicted %d logs: it did not open all %d partitions", n.reg.Evictions(), partitions)
	}
	check(n)
}

// TestBudget_AtTheOpenFileLimitACallIsBusyAndNoLogPoisoned: with the
// process out of descriptors, an open of another partition answers
// ErrBusy (retryable), poisons nothing and leaks nothing, and the same
// call succeeds once descriptors are free (docs/durability.md row 30).
func TestBudget_AtTheOpenFileLimitACallIsBusyAndNoLogPoisoned(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{MaxOpenLogs: -1})
	if _, _, err := n.CreateTopic(bg, "orders", 2, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := n.reg.CloseLive(key("orders", 1)); err != nil {
		t.Fatal(err)
	}
	before := d.OpenFiles()
	d.SetMaxOpenFiles(before)
	_, err := n.Produce(bg, "orders", 1, recs("orders", 1, 0, 1))
	if !errors.Is(err, ErrBusy) || errors.Is(err, partition.ErrLogPoisoned) {
		t.Fatalf("produce at the open-file limit: %v, want ErrBusy", err)
	}
	if _, err := n.Read(bg, "orders", 1, 0, 10, 1<<20); !errors.Is(err, ErrBusy) {
		t.Fatalf("read at the open-file limit: %v, want ErrBusy", err)
	}
	if d.OpenFiles() != before {
		t.Fatalf("%d files open after the refusals, %d before", d.OpenFiles(), before)
	}
	d.SetMaxOpenFiles(0)
	for p := range 2 {
		if base, err := n.Produce(bg, "orders", p, recs("orders", p, 1, 1)); err != nil || base != int64(p^1) {
			t.Fatalf("produce to %d once descriptors are free: base %d, %v", p, base, err)
		}
	}
}

// TestBudget_AConsumeOrAckAtTheOpenFileLimitIsBusy: the consumer's own
// files meet the open-file limit too (the progress's recovery opens
// consumer.ahead, a queue's first lease consumer.lease): an ack, a read
// of the consumer state and a consume answer ErrBusy there, as a produce
// and a fetch do, with nothing acked or leased (found by the simulator's
// EMFILE faults: they answered the bare EMFILE, a 500).
func TestBudget_AConsumeOrAckAtTheOpenFileLimitIsBusy(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	makeTopic(t, n, "jobs", 1, 10)
	if _, err := n.Ack(bg, "jobs", 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, d, Config{}) // consumer progress and lease ids load on first touch
	dir := partitionPath("jobs", 0)
	in := d.Inject(sim.Fault{Op: sim.OpOpen, Path: path.Join(dir, wire.ConsumerAheadFileName), Err: syscall.EMFILE})
	if _, err := n.Ack(bg, "jobs", 0, 2); !errors.Is(err, ErrBusy) {
		t.Errorf("ack at the open-file limit: %v, want ErrBusy", err)
	}
	if _, err := n.ConsumerState(bg, "jobs", 0); !errors.Is(err, ErrBusy) {
		t.Errorf("consumer state at the open-file limit: %v, want ErrBusy", err)
	}
	if got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour}); len(got) != 0 || !errors.Is(err, ErrBusy) {
		t.Errorf("consume at the open-file limit of consumer.ahead: %d leased, %v; want none, ErrBusy", len(got), err)
	}
	in.Remove()
	in = d.Inject(sim.Fault{Op: sim.OpOpen, Path: path.Join(dir, wire.ConsumerLeaseFileName+"*"), Err: syscall.EMFILE})
	if got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour}); len(got) != 0 || !errors.Is(err, ErrBusy) {
		t.Errorf("consume at the open-file limit of consumer.lease: %d leased, %v; want none, ErrBusy", len(got), err)
	}
	in.Remove()
	got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
	if err != nil || len(got) != 9 || got[0].Offset != 0 || got[1].Offset != 2 {
		t.Fatalf("consume once descriptors are free: %d leased, %v; want 0 and 2 to 9", len(got), err)
	}
}

// TestBudget_KeepsLogsRetentionStillWorksOn: with the cold walk off only
// open logs are swept, so the budget, like idle eviction, never closes a
// log whose retention still has work; it closes another one (found by
// review).
func TestBudget_KeepsLogsRetentionStillWorksOn(t *testing.T) {
	d := newTestDisk(t, 1)
	clock := time.Now()
	d.SetClock(func() time.Time { return clock })
	n := startNode(t, d, Config{MaxOpenLogs: 2}) // the cold walk is off
	n.CreateTopic(bg, "expiring", 1, Retention{Ms: 1})
	for _, topic := range []string{"a", "b"} {
		n.CreateTopic(bg, topic, 1, Retention{})
	}
	if _, err := n.Produce(bg, "expiring", 0, recs("expiring", 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	expiring, _ := n.Log(bg, "expiring", 0)
	for {
		if ok, _ := expiring.Expired(bg); ok {
			break
		}
	}
	for _, topic := range []string{"a", "b"} {
		if _, err := n.Produce(bg, topic, 0, recs(topic, 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := n.reg.Lookup(key("expiring", 0)); !ok {
		t.Fatal("the budget closed a log with expired segments while the cold walk is off")
	}
}

// TestBudget_StartupRecoversEveryPartitionUnderATinyBudget: a budget
// smaller than the startup workers still recovers every partition: the
// workers are cut to fit, and an opener may close its own topic's idle
// logs (found by review: a worker whose open found every log under
// another worker's guard was skipped).
func TestBudget_StartupRecoversEveryPartitionUnderATinyBudget(t *testing.T) {
	d := newTestDisk(t, 1)
	first := startNode(t, d, Config{MaxOpenLogs: -1})
	for _, topic := range []string{"a", "b", "c"} {
		first.CreateTopic(bg, topic, 20, Retention{})
		for p := range 20 {
			if _, err := first.Produce(bg, topic, p, recs(topic, p, 0, 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	n := startNode(t, d, Config{MaxOpenLogs: 1, Logger: zap.New(core)})
	if skipped := logs.FilterMessage("startup: skipping a partition that failed to open").Len(); skipped > 0 {
		t.Fatalf("startup skipped %d of 60 partitions under a budget of 1", skipped)
	}
	if n.reg.Len() != 1 || n.reg.Evictions() != 59 {
		t.Fatalf("after startup %d open, %d evicted; want 1 and 59", n.reg.Len(), n.reg.Evictions())
	}
}

// TestLogOpened_ADeleteWakesItsWaiters: a waiter for a closed partition's
// log to open again (a long poll whose log was closed under it) is woken
// when its topic is deleted, never left waiting for an open that cannot
// come; a waiter on another topic is not.
func TestLogOpened_ADeleteWakesItsWaiters(t *testing.T) {
	n := startNode(t, nil, Config{})
	makeTopic(t, n, "gone", 1, 1)
	makeTopic(t, n, "kept", 1, 1)
	for _, topic := range []string{"gone", "kept"} {
		if err := n.reg.CloseLive(key(topic, 0)); err != nil {
			t.Fatal(err)
		}
	}
	gone, kept := n.LogOpened("gone", 0), n.LogOpened("kept", 0)
	if err := n.DeleteTopic(bg, "gone"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gone:
	default:
		t.Fatal("the delete left the waiter of its partition waiting")
	}
	select {
	case <-kept:
		t.Fatal("a delete woke the waiter of another topic")
	default:
	}
}

// TestDescriptorsFor_IsWhatTheDefaultBudgetDividesTheLimitBy: the budget
// the open-file limit gives (above its floor of 16) needs no more
// descriptors than the limit, and one log more would need more: the
// disk check's descriptor finding and the default budget agree.
func TestDescriptorsFor_IsWhatTheDefaultBudgetDividesTheLimitBy(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	for _, reserved := range []int{0, 128, 1000} {
		budget := DefaultMaxOpenLogsBeside(reserved)
		if budget == 0 {
			t.Fatalf("the open-file limit %d gave no budget", lim.Cur)
		}
		if budget == minOpenLogs {
			continue // the floor: a limit this low is what the disk check warns of
		}
		if need := DescriptorsFor(budget, reserved); uint64(need) > lim.Cur {
			t.Errorf("reserved %d: a budget of %d needs %d descriptors, over the limit %d", reserved, budget, need, lim.Cur)
		}
		if need := DescriptorsFor(budget+1, reserved); uint64(need) <= lim.Cur {
			t.Errorf("reserved %d: a budget of %d leaves room for one log more under the limit %d", reserved, budget, lim.Cur)
		}
	}
}

// TestBudget_AnIdleVictimWhoseBoundaryIsOnDiskClosesWithoutAnFsync: a log
// the budget closes that nobody committed to since its boundary was
// written (read, not produced to) closes without a write or an fsync of
// anything in its directory; one committed to writes and syncs its new
// boundary (docs/design.md, "High watermark and hidden tail").
func TestBudget_AnIdleVictimWhoseBoundaryIsOnDiskClosesWithoutAnFsync(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{MaxOpenLogs: 2})
	makeTopic(t, n, "orders", 3, 1)
	for p := range 3 {
		if err := n.reg.CloseLive(key("orders", p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []int{0, 1} { // opened to be read: nothing committed
		if got := readValues(t, n, "orders", p); len(got) != 1 {
			t.Fatalf("partition %d: %d records", p, len(got))
		}
	}
	changed := func(calls []sim.Call, dir string) []sim.Call {
		var out []sim.Call
		for _, c := range calls {
			switch c.Op {
			case sim.OpWrite, sim.OpTruncate, sim.OpSync, sim.OpSyncDir, sim.OpAllocate, sim.OpRemove, sim.OpRename, sim.OpMkdir:
				if strings.HasPrefix(c.Path, dir+"/") || c.Path == dir {
					out = append(out, c)
				}
			}
		}
		return out
	}
	var mu sync.Mutex
	var calls []sim.Call
	d.SetHook(func(c sim.Call) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
		return nil
	})
	t.Cleanup(func() { d.SetHook(nil) }) // before the node's close
	taken := func() []sim.Call {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}
	evicted := n.reg.Evictions()
	readValues(t, n, "orders", 2) // past the budget: closes 0, the least recently used
	if _, open := n.reg.Lookup(key("orders", 0)); open || n.reg.Evictions() != evicted+1 {
		t.Fatalf("partition 0 open %v, %d evictions; want it evicted", open, n.reg.Evictions()-evicted)
	}
	if got := changed(taken(), partitionPath("orders", 0)); len(got) != 0 {
		t.Fatalf("the eviction of a log read but never committed to made %v", got)
	}
	for _, p := range []int{1, 2} { // 1 committed to, then 2: 1 is the least recently used
		if _, err := n.Produce(bg, "orders", p, recs("orders", p, 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	taken()
	readValues(t, n, "orders", 0) // closes 1
	hwm := path.Join(partitionPath("orders", 1), wire.HWMFileName)
	var onHWM []sim.Op
	for _, c := range changed(taken(), partitionPath("orders", 1)) {
		if c.Path == hwm && (c.Op == sim.OpWrite || c.Op == sim.OpSync) {
			onHWM = append(onHWM, c.Op)
		}
	}
	if len(onHWM) != 2 || onHWM[0] != sim.OpWrite || onHWM[1] != sim.OpSync {
		t.Fatalf("the eviction of a log committed to made %v on its hwm file; want a write, then an fsync", onHWM)
	}
}

// TestBudget_NodesWithoutAFrameCacheBoundReportTheProcesssOnce: with
// FrameCacheBytes < 0 a node's logs share the partition package's
// process-wide budget; the cache gauges report that budget, counted once
// however many such nodes share a registerer.
func TestBudget_NodesWithoutAFrameCacheBoundReportTheProcesssOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	for i := range 2 {
		startNode(t, newTestDisk(t, uint64(i+1)), Config{FrameCacheBytes: -1, Registerer: reg})
	}
	if got, want := series(t, reg, "narad_storage_frame_cache_limit_bytes"), fmt.Sprintf("%d\n", partition.DefaultCacheBudgetBytes); got != want {
		t.Fatalf("narad_storage_frame_cache_limit_bytes: %q, want %q", got, want)
	}
}
