package runtime

import (
	"errors"
	goruntime "runtime"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/prometheus/client_golang/prometheus"
)

// Regressions found by review of the queue consume, one test each.

type consumeResult struct {
	recs []LeasedRecord
	err  error
	at   time.Time
}

// TestQueue_ACommitWakesAConsumerOfItsPartition: a commit on partition 1
// wakes the consumer parked for partition 1, not the older one parked for
// partition 0 (which would find nothing and keep the wake-up).
func TestQueue_ACommitWakesAConsumerOfItsPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 2, 0)
		a := make(chan consumeResult, 1)
		go func() {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Wait: time.Hour})
			a <- consumeResult{got, err, time.Now()}
		}()
		synctest.Wait()
		b := make(chan consumeResult, 1)
		go func() {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 1, Wait: time.Hour})
			b <- consumeResult{got, err, time.Now()}
		}()
		synctest.Wait()
		committed := time.Now()
		if _, err := n.Produce(bg, "jobs", 1, recs("jobs", 1, 0, 1)); err != nil {
			t.Fatal(err)
		}
		r := <-b
		if r.err != nil || len(r.recs) != 1 || !r.at.Equal(committed) {
			t.Errorf("consumer of partition 1: %d records at +%v (%v); want the record at the commit",
				len(r.recs), r.at.Sub(committed), r.err)
		}
		<-a
	})
}

// TestQueue_ALateNackLeavesAnotherConsumersLease: a consumer whose lease
// ran out nacks late, after another consumer leased the record: the nack
// gives nothing back (lease ids differ), so no third consumer gets the
// record while the second's lease holds.
func TestQueue_ALateNackLeavesAnotherConsumersLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 1, 1)
		first, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: 10 * time.Second})
		if err != nil || len(first) != 1 {
			t.Fatalf("A: %v, %v", first, err)
		}
		<-time.After(11 * time.Second) // A's lease runs out (the bubble's clock)
		second, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
		if err != nil || len(second) != 1 {
			t.Fatalf("B: %v, %v", second, err)
		}
		if given, err := n.Nack(bg, "jobs", 0, first[0].LeaseID, first[0].Offset); err != nil || given != 0 {
			t.Errorf("A's late nack gave back %d (%v): B's lease", given, err)
		}
		third, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
		if err != nil || len(third) != 0 {
			t.Fatalf("C leased %v while B's lease holds to %v", third, second[0].LeaseDeadline)
		}
	})
}

// TestQueue_AConsumeThatDoesNotWaitSwallowsNoWakeUp: a consume that does
// not wait never parks, so a commit during its check wakes the long poll
// parked behind it, which leases the record at the commit.
func TestQueue_AConsumeThatDoesNotWaitSwallowsNoWakeUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 1)
		n := startNode(t, d, Config{})
		makeTopic(t, n, "jobs", 2, 0)
		// Partition 0: one record, acked; its progress settled by a close,
		// so the next touch recovers it from disk (where B is held).
		produceN(t, n, "jobs", 1, 1)
		if _, err := n.Ack(bg, "jobs", 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Log(bg, "jobs", 0); err != nil {
			t.Fatal(err)
		}
		// Partition 1: open, its consumer state and queue in place.
		if _, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 1}); err != nil {
			t.Fatal(err)
		}
		ahead := partitionPath("jobs", 0) + "/consumer.ahead"
		held, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpOpen && c.Path == ahead {
				once.Do(func() { close(held); <-release })
			}
			return nil
		})
		// B: any partition, no wait; checks partition 1 (nothing), then
		// partition 0, where it is held in the consumer recovery.
		b := make(chan consumeResult, 1)
		go func() {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: AnyPartition})
			b <- consumeResult{got, err, time.Now()}
		}()
		<-held
		// C: a long poll of partition 1, parked behind B.
		c := make(chan consumeResult, 1)
		go func() {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 1, Wait: time.Hour})
			c <- consumeResult{got, err, time.Now()}
		}()
		synctest.Wait()
		committed := time.Now()
		if _, err := n.Produce(bg, "jobs", 1, recs("jobs", 1, 0, 1)); err != nil {
			t.Fatal(err)
		}
		close(release)
		if r := <-b; r.err != nil || len(r.recs) != 0 {
			t.Fatalf("B: %v, %v", r.recs, r.err)
		}
		r := <-c
		if r.err != nil || len(r.recs) != 1 || !r.at.Equal(committed) {
			t.Errorf("C: %d records at +%v (%v); want the record at the commit", len(r.recs), r.at.Sub(committed), r.err)
		}
		d.SetHook(nil)
	})
}

// TestQueue_ALogClosingUnderAConsumeIsReopened: the partition's log
// closing (idle eviction, the open-log budget) while a consume reads it
// does not fail the consume: it starts over on the reopened log, as
// Node.Read does.
func TestQueue_ALogClosingUnderAConsumeIsReopened(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	makeTopic(t, n, "jobs", 1, 0)
	for i := range 2 { // two frames
		if _, err := n.Produce(bg, "jobs", 0, recs("jobs", 0, i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
	if err != nil || len(got) != 2 {
		t.Fatalf("%v, %v", got, err)
	}
	if given, err := n.Nack(bg, "jobs", 0, got[0].LeaseID, 0, 1); err != nil || given != 2 {
		t.Fatalf("nack: %d, %v", given, err)
	}
	if err := n.reg.CloseLive(key("jobs", 0)); err != nil { // no frame cached
		t.Fatal(err)
	}
	if _, err := n.Log(bg, "jobs", 0); err != nil {
		t.Fatal(err)
	}
	seg := partitionPath("jobs", 0) + "/00000000000000000000.log"
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRead && c.Path == seg {
			once.Do(func() { close(held); <-release })
		}
		return nil
	})
	defer d.SetHook(nil)
	done := make(chan error, 1)
	go func() {
		_, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
		done <- err
	}()
	<-held // reading offset 0 (redelivery)
	if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("consume across an idle close: %v", err)
	}
}

// TestQueue_RedeliveriesCountOnlyRecordsDeliveredBefore: records a failed
// read gave back were never delivered, so their first lease is not counted
// in narad_consumer_redeliveries_total.
func TestQueue_RedeliveriesCountOnlyRecordsDeliveredBefore(t *testing.T) {
	d := newTestDisk(t, 1)
	reg := prometheus.NewRegistry()
	n := startNode(t, d, Config{Registerer: reg})
	makeTopic(t, n, "jobs", 1, 0)
	for i := range 2 {
		if _, err := n.Produce(bg, "jobs", 0, recs("jobs", 0, i*5, 5)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
		t.Fatal(err)
	}
	seg := partitionPath("jobs", 0) + "/00000000000000000000.log"
	if _, err := n.Log(bg, "jobs", 0); err != nil {
		t.Fatal(err)
	}
	fault := d.Inject(sim.Fault{Op: sim.OpRead, Path: seg, Off: frameStart(t, d, seg, 1), Len: 1, Err: syscall.EIO, Sticky: true})
	if _, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("%v, want EIO", err)
	}
	fault.Remove()
	if got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour}); err != nil || len(got) != 10 {
		t.Fatalf("%d, %v", len(got), err)
	}
	if got := series(t, reg, "narad_consumer_redeliveries_total"); got != "0\n" {
		t.Errorf("narad_consumer_redeliveries_total %q after a first delivery", got)
	}
}

// TestQueue_AQueueIsReplacedUnderItsLock: queues.of replacing a queue of
// another incarnation (a consume that looked its consumer up before a
// delete, and one of the recreated topic) drops the old queue under its
// own lock, racing no holder of it (the race detector checks).
func TestQueue_AQueueIsReplacedUnderItsLock(t *testing.T) {
	n := startNode(t, nil, Config{})
	makeTopic(t, n, "jobs", 2, 1)
	if _, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	k := key("jobs", 0)
	old := n.queues.lookup(k)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a holder of old.mu, as nothingFree or expire
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			old.mu.Lock()
			_ = old.dropped
			old.mu.Unlock()
		}
	}()
	for i := 0; i < 1000; i++ { // let the holder run: the race detector needs the overlap
		goruntime.Gosched()
	}
	n.queues.of(k, &consumer{incarnation: old.incarnation + "-recreated"})
	close(stop)
	wg.Wait()
}

// TestQueue_AnInstallDropsThePartitionsLeases: an install (the storage
// side of a move) replaces the partition's directory, consumer progress
// included, and drops its queue with it, so records produced after the
// install are leased.
func TestQueue_AnInstallDropsThePartitionsLeases(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	files, rec := installFixture(t, n) // 10 records kept, 20 in the log
	got, err := n.Consume(bg, "orders", ConsumeOptions{Partition: 0, MaxRecords: 100, Lease: time.Hour})
	if err != nil || len(got) != 20 {
		t.Fatalf("%d, %v", len(got), err)
	}
	for _, r := range got {
		if _, err := n.Ack(bg, "orders", 0, r.Offset); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.InstallPartition(bg, "orders", 0, rec.Incarnation, files); err != nil {
		t.Fatal(err)
	}
	base, err := n.Produce(bg, "orders", 0, recs("orders", 0, 100, 5))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := n.ConsumerState(bg, "orders", 0)
	got, err = n.Consume(bg, "orders", ConsumeOptions{Partition: 0, MaxRecords: 100, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	leased := map[int64]bool{}
	for _, r := range got {
		leased[r.Offset] = true
	}
	for o := max(base, st.Frontier); o < base+5; o++ {
		if !leased[o] {
			t.Errorf("offset %d, produced after the install (frontier %d), not leased; got %d records", o, st.Frontier, len(got))
			break
		}
	}
}
