package runtime

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Tests of docs/design.md, "Queue consume".

// makeTopic creates a topic of partitions partitions and commits count
// records to each (none with count 0).
func makeTopic(t *testing.T, n *testNode, topic string, partitions, count int) {
	t.Helper()
	if _, _, err := n.CreateTopic(bg, topic, partitions, Retention{}); err != nil {
		t.Fatal(err)
	}
	// The create's change feed starts a recheck that takes the topic's
	// guard. Left running, it can meet a test's hook that holds a file
	// call under that guard: blocked on a mutex, it is not durably
	// blocked, and a synctest.Wait then waits for ever (found in CI: one
	// run in a few hundred of TestQueue_AWakeUpForAPartitionNotLeasedIsPassedOn).
	n.background.Wait()
	if count > 0 {
		produceN(t, n, topic, partitions, count)
	}
}

// produceN commits n records to each of a topic's partitions, one batch
// each.
func produceN(t *testing.T, n *testNode, topic string, partitions, count int) {
	t.Helper()
	for p := range partitions {
		if _, err := n.Produce(bg, topic, p, recs(topic, p, 0, count)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestQueue_EachRecordToExactlyOneConsumer: concurrent consumers of any
// partition together lease every record once and only once while their
// leases hold; once acked, nothing is delivered again and every frontier
// stands at its high watermark.
func TestQueue_EachRecordToExactlyOneConsumer(t *testing.T) {
	const partitions, perPartition, consumers = 3, 100, 6
	n := startNode(t, nil, Config{})
	if _, _, err := n.CreateTopic(bg, "jobs", partitions, Retention{}); err != nil {
		t.Fatal(err)
	}
	produceN(t, n, "jobs", partitions, perPartition)
	var mu sync.Mutex
	seen := map[[2]int64]int{}
	var wg sync.WaitGroup
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: AnyPartition, MaxRecords: 7, Lease: time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					seen[[2]int64{int64(r.Partition), r.Offset}]++
					if want := fmt.Sprintf("jobs/%d/%d", r.Partition, r.Offset); string(r.Value) != want {
						t.Errorf("%d/%d: %q, want %q", r.Partition, r.Offset, r.Value, want)
					}
				}
				mu.Unlock()
				for _, r := range got {
					if _, err := n.Ack(bg, "jobs", r.Partition, r.Offset); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != partitions*perPartition {
		t.Fatalf("%d distinct records delivered, want %d", len(seen), partitions*perPartition)
	}
	for k, times := range seen {
		if times != 1 {
			t.Fatalf("record %v delivered %d times under an unexpired lease", k, times)
		}
	}
	for p := range partitions {
		st, err := n.ConsumerState(bg, "jobs", p)
		if err != nil || st.Frontier != perPartition {
			t.Fatalf("partition %d frontier %d, %v; want %d", p, st.Frontier, err, perPartition)
		}
	}
}

// TestQueue_NackAndExpiryRedeliver: a nacked record is delivered again at
// once; a lease that runs out gives its record back, and a consumer
// parked on the topic is woken for it; an acked record never comes back.
func TestQueue_NackAndExpiryRedeliver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		n := startNode(t, nil, Config{Registerer: reg})
		makeTopic(t, n, "jobs", 1, 4)
		got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: 10 * time.Second})
		if err != nil || len(got) != 4 {
			t.Fatalf("first consume: %d records, %v", len(got), err)
		}
		if _, err := n.Ack(bg, "jobs", 0, 0); err != nil {
			t.Fatal(err)
		}
		if given, err := n.Nack(bg, "jobs", 0, got[0].LeaseID+1, 2); err != nil || given != 0 {
			t.Fatalf("nack under another lease's id: %d given back, %v; want 0", given, err)
		}
		if given, err := n.Nack(bg, "jobs", 0, got[0].LeaseID, 2, 0, 99); err != nil || given != 1 {
			t.Fatalf("nack of 2 (leased), 0 (acked) and 99 (never): %d given back, %v; want 1", given, err)
		}
		again, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: 10 * time.Second})
		if err != nil || len(again) != 1 || again[0].Offset != 2 {
			t.Fatalf("after the nack: %v, %v; want offset 2 alone", again, err)
		}
		// Offsets 1 and 3 are leased until 10 s; 2 until 10 s from now.
		// A consumer parked with a long wait is woken by the expiry.
		start := time.Now()
		expired, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Minute, Wait: time.Hour})
		if err != nil || len(expired) != 3 {
			t.Fatalf("after the leases ran out: %v, %v; want 1, 2 and 3", expired, err)
		}
		if waited := time.Since(start); waited != 10*time.Second {
			t.Fatalf("woken after %v, want the lease's 10 s", waited)
		}
		offsets := []int64{expired[0].Offset, expired[1].Offset, expired[2].Offset}
		if fmt.Sprint(offsets) != "[1 2 3]" {
			t.Fatalf("redelivered %v, want [1 2 3]", offsets)
		}
		if got := series(t, reg, "narad_consumer_redeliveries_total"); got != "4\n" {
			t.Fatalf("narad_consumer_redeliveries_total %q, want 4", got)
		}
		if got := series(t, reg, "narad_consumer_lease_expirations_total"); got != "3\n" {
			t.Fatalf("narad_consumer_lease_expirations_total %q, want 3", got)
		}
	})
}

// TestQueue_ParkedConsumerWokenByACommit: a consume waiting on an empty
// topic is woken by the commit of a record (the logs' wake notifier), not
// by a timer, and leases it.
func TestQueue_ParkedConsumerWokenByACommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 2, 0)
		type result struct {
			recs []LeasedRecord
			err  error
			at   time.Time
		}
		done := make(chan result, 1)
		go func() {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: AnyPartition, Wait: time.Hour})
			done <- result{got, err, time.Now()}
		}()
		synctest.Wait()
		if parked := n.queues.parking("jobs").count.Load(); parked != 1 {
			t.Fatalf("%d consumers parked, want 1", parked)
		}
		<-time.After(time.Minute)
		committed := time.Now()
		if _, err := n.Produce(bg, "jobs", 1, recs("jobs", 1, 0, 1)); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || len(r.recs) != 1 || r.recs[0].Partition != 1 || r.recs[0].Offset != 0 {
			t.Fatalf("woken consume: %v, %v", r.recs, r.err)
		}
		if !r.at.Equal(committed) {
			t.Fatalf("answered at %v, the commit was at %v", r.at, committed)
		}
	})
}

// TestQueue_LeasesSurviveTheLogClosing: closing a partition's log (idle
// eviction, the open-log budget) keeps its leases: nothing leased is
// handed out again before its lease runs out.
func TestQueue_LeasesSurviveTheLogClosing(t *testing.T) {
	n := startNode(t, nil, Config{})
	makeTopic(t, n, "jobs", 1, 10)
	first, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: 4, Lease: time.Hour})
	if err != nil || len(first) != 4 {
		t.Fatalf("first: %d, %v", len(first), err)
	}
	if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
		t.Fatal(err)
	}
	rest, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
	if err != nil || len(rest) != 6 || rest[0].Offset != 4 {
		t.Fatalf("after the close: %d records from %v, %v; want 6 from offset 4", len(rest), rest, err)
	}
}

// TestQueue_DamagedFrameIsSkippedCountedAndLogged: a sealed frame that
// fails its check is settled without being delivered, counted in
// narad_consumer_corrupt_skipped_total (exposed at zero before) and logged
// once as a warning naming topic, partition and offsets; the records
// around it are delivered and the frontier passes it.
func TestQueue_DamagedFrameIsSkippedCountedAndLogged(t *testing.T) {
	d := newTestDisk(t, 1)
	reg := prometheus.NewRegistry()
	core, logs := observer.New(zapcore.WarnLevel)
	n := startNode(t, d, Config{Registerer: reg, Logger: zap.New(core)})
	if got := series(t, reg, "narad_consumer_corrupt_skipped_total"); got != "0\n" {
		t.Fatalf("narad_consumer_corrupt_skipped_total before any damage: %q", got)
	}
	makeTopic(t, n, "jobs", 1, 0)
	for i := range 3 { // three frames of 5 records
		if _, err := n.Produce(bg, "jobs", 0, recs("jobs", 0, i*5, 5)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.reg.CloseLive(key("jobs", 0)); err != nil { // no frame cached
		t.Fatal(err)
	}
	seg := filepath.Join(partitionPath("jobs", 0), "00000000000000000000.log")
	frame2 := frameStart(t, d, seg, 1)
	if err := d.Damage(seg, frame2+40, []byte("rot")); err != nil {
		t.Fatal(err)
	}
	got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for _, r := range got {
		offsets = append(offsets, r.Offset)
	}
	if fmt.Sprint(offsets) != "[0 1 2 3 4 10 11 12 13 14]" {
		t.Fatalf("delivered %v, want the first and third frames", offsets)
	}
	if got := series(t, reg, "narad_consumer_corrupt_skipped_total"); got != "5\n" {
		t.Fatalf("narad_consumer_corrupt_skipped_total %q, want 5", got)
	}
	warned := logs.FilterMessage("queue consume skipped permanently unreadable records").All()
	if len(warned) != 1 || warned[0].ContextMap()["from_offset"] != int64(5) || warned[0].ContextMap()["to_offset"] != int64(9) {
		t.Fatalf("warnings %v, want one for offsets 5 to 9", warned)
	}
	for _, r := range got {
		if _, err := n.Ack(bg, "jobs", 0, r.Offset); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := n.ConsumerState(bg, "jobs", 0); err != nil || st.Frontier != 15 {
		t.Fatalf("frontier %d, %v; want 15, past the damage", st.Frontier, err)
	}
}

// TestQueue_ReadErrorGivesTheLeaseBack: an I/O error under a consume
// fails it, leases nothing, and the records come on the next consume.
func TestQueue_ReadErrorGivesTheLeaseBack(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	makeTopic(t, n, "jobs", 1, 0)
	for i := range 2 {
		if _, err := n.Produce(bg, "jobs", 0, recs("jobs", 0, i*5, 5)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(partitionPath("jobs", 0), "00000000000000000000.log")
	if _, err := n.Log(bg, "jobs", 0); err != nil { // opened before the fault
		t.Fatal(err)
	}
	fault := d.Inject(sim.Fault{Op: sim.OpRead, Path: seg, Off: frameStart(t, d, seg, 1), Len: 1, Err: syscall.EIO, Sticky: true})
	if _, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("consume over a failing read: %v, want EIO", err)
	}
	fault.Remove()
	got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
	if err != nil || len(got) != 10 {
		t.Fatalf("after the fault: %d records, %v; want all 10", len(got), err)
	}
}

// TestQueue_DroppedWithItsIncarnation: deleting a topic drops its leases
// and wakes the consumers parked on it, which find it gone; the recreated
// topic's records are delivered from offset 0.
func TestQueue_DroppedWithItsIncarnation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 1, 3)
		if got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour}); err != nil || len(got) != 3 {
			t.Fatalf("%d, %v", len(got), err)
		}
		parked := make(chan error, 1)
		go func() {
			_, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Wait: time.Hour})
			parked <- err
		}()
		synctest.Wait()
		deleted := time.Now()
		if err := n.DeleteTopic(bg, "jobs"); err != nil {
			t.Fatal(err)
		}
		if err := <-parked; !errors.Is(err, ErrTopicNotFound) || !time.Now().Equal(deleted) {
			t.Fatalf("a consume parked on the deleted topic: %v after %v; want ErrTopicNotFound at once", err, time.Since(deleted))
		}
		if q := n.queues.lookup(key("jobs", 0)); q != nil {
			t.Fatal("the deleted incarnation's leases are still held")
		}
		makeTopic(t, n, "jobs", 1, 2)
		got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
		if err != nil || len(got) != 2 || got[0].Offset != 0 {
			t.Fatalf("the new incarnation: %v, %v; want offsets 0 and 1", got, err)
		}
	})
}

// TestQueue_LeaseBoundPerPartition: a partition holding
// MaxLeasedPerPartition leased records leases no more
// (ErrTooManyLeased) until some are settled.
func TestQueue_LeaseBoundPerPartition(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 20})
	makeTopic(t, n, "jobs", 1, 0)
	if _, err := n.Produce(bg, "jobs", 0, recs("jobs", 0, 0, MaxLeasedPerPartition+1)); err != nil {
		t.Fatal(err)
	}
	leased := 0
	for leased < MaxLeasedPerPartition {
		got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: 5000, MaxBytes: 64 << 20, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		leased += len(got)
	}
	if leased != MaxLeasedPerPartition {
		t.Fatalf("%d leased, want the bound %d", leased, MaxLeasedPerPartition)
	}
	if _, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour}); !errors.Is(err, ErrTooManyLeased) {
		t.Fatalf("consume at the bound: %v, want ErrTooManyLeased", err)
	}
	if _, err := n.Ack(bg, "jobs", 0, 0); err != nil {
		t.Fatal(err)
	}
	got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
	if err != nil || len(got) != 1 || got[0].Offset != MaxLeasedPerPartition {
		t.Fatalf("after an ack: %d records, %v; want the last one", len(got), err)
	}
}

// frameStart is the byte position of the i-th frame (0-based) of a
// segment, from the frame lengths in their headers.
func frameStart(t *testing.T, d *sim.Disk, seg string, i int) int64 {
	t.Helper()
	b, err := d.Contents(seg)
	if err != nil {
		t.Fatal(err)
	}
	pos := int64(0)
	for range i {
		h, err := wire.ParseFrameHeader(b[pos:])
		if err != nil {
			t.Fatal(err)
		}
		pos += h.FrameLen()
	}
	return pos
}

// TestQueue_LagYouCanSee: the consumer state carries the high watermark,
// the lag and the leased count, and /metrics has them per partition (and
// each cursor's lag), computed at the scrape from what is in memory.
func TestQueue_LagYouCanSee(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := startNode(t, nil, Config{Registerer: reg})
	makeTopic(t, n, "jobs", 1, 10)
	if _, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: 4, Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Ack(bg, "jobs", 0, 0, 2); err != nil {
		t.Fatal(err)
	}
	st, err := n.ConsumerState(bg, "jobs", 0)
	if err != nil || st.HighWatermark != 10 || st.Lag != 8 || st.Leased != 2 {
		t.Fatalf("consumer state %+v, %v; want high watermark 10, lag 8, 2 leased", st, err)
	}
	if _, err := n.CreateCursor(bg, "jobs", "audit", CursorEarliest); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ReadCursor(bg, "jobs", "audit", 0, 3, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"narad_consumer_lag":    "partition=0 topic=jobs 8\n",
		"narad_consumer_leased": "partition=0 topic=jobs 2\n",
		"narad_cursor_lag":      "cursor=audit partition=0 topic=jobs 7\n",
	} {
		if got := series(t, reg, name); got != want {
			t.Fatalf("%s: %q, want %q", name, got, want)
		}
	}
}
