package runtime

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// Regressions found by the second review of the queue consume fixes
// (consumer.acked, bindLocked, consumer.lease), one test each.

// TestReview2_AnyPartitionConsumeLeasesAcksLostByAProgressTheQueueNeverBound:
// the acks a close failed to write out were made to progress the queue
// never leased against (the log was evicted after the lease and reopened
// by the acks). A consume of any partition must not pass over the
// partition as having nothing free: those records are neither acked,
// leased nor given back, and nothing else will ever lease them.
func TestReview2_AnyPartitionConsumeLeasesAcksLostByAProgressTheQueueNeverBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 1)
		n := startNode(t, d, Config{})
		makeTopic(t, n, "jobs", 2, 10)
		for p := range 2 {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: p, MaxRecords: 10, Lease: time.Hour})
			if err != nil || len(got) != 10 {
				t.Fatalf("p%d: leased %d, %v", p, len(got), err)
			}
		}
		// Idle eviction after the lease: the queue stays bound to the
		// progress this close settles (cleanly).
		if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
			t.Fatal(err)
		}
		// The acks reopen the log and go to progress recovered afresh,
		// which no lease has met yet.
		if _, err := n.Ack(bg, "jobs", 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9); err != nil {
			t.Fatal(err)
		}
		// Its close fails to write them out (no tick ran: the bubble's
		// clock stands still, so the close's write is the only one).
		ahead := filepath.Join(partitionPath("jobs", 0), wire.ConsumerAheadFileName)
		d.Inject(sim.Fault{Op: sim.OpWrite, Path: ahead, Err: syscall.EIO})
		if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
			t.Fatal(err)
		}
		if st, err := n.ConsumerState(bg, "jobs", 0); err != nil || st.Frontier != 0 || st.Leased != 0 {
			t.Fatalf("recovered %+v (%v); the test needs the acks lost and nothing leased", st, err)
		}
		for attempt := range 2 { // the rotation starts at each partition once
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: AnyPartition, MaxRecords: 100, Lease: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) > 0 {
				if got[0].Partition != 0 || len(got) != 10 {
					t.Fatalf("leased %d records of p%d; want the 10 of p0 again", len(got), got[0].Partition)
				}
				return
			}
			t.Logf("consume %d of any partition leased nothing", attempt)
		}
		st, _ := n.ConsumerState(bg, "jobs", 0)
		t.Fatalf("p0 holds %d records neither acked (frontier %d), leased (%d) nor given back, and a consume of any partition passes over it",
			st.Lag, st.Frontier, st.Leased)
	})
}

// TestReview2_LeaseIDsNeverRepeatAfterACrashTearsTheFloor: a crash in a
// raise of consumer.lease, before its fdatasync, must leave a whole
// floor. Written in place, its sector could be left garbage (fault model
// row 4), and a damaged floor starts the ids at the clock, which is
// behind ids given before: every load starts above the floor, a block of
// 2^20 ids (about a second of the clock) above the last id given, so the
// ids of a process that restarted within a second run ahead of the
// clock, and the process after the crash gave them again. Each restart
// here takes 100 ms of the bubble's clock; the leases the last process
// gives before it would reach the held id are drawn directly (a consume
// draws one each, even when it leases nothing).
func TestReview2_LeaseIDsNeverRepeatAfterACrashTearsTheFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 1)
		consume := func(n *testNode) (LeasedRecord, error) {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
			if err == nil && len(got) != 1 {
				t.Fatalf("leased %v", got)
			}
			if err != nil {
				return LeasedRecord{}, err
			}
			return got[0], nil
		}
		n := startNode(t, d, Config{})
		makeTopic(t, n, "jobs", 1, 1)
		first, err := consume(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // a restart's duration, on the bubble's clock
		n = startNode(t, d, Config{})
		held, err := consume(n) // the lease a consumer holds across the next restarts
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("ids %d then %d, at the clock %d", first.LeaseID, held.LeaseID, time.Now().UnixMicro())
		time.Sleep(100 * time.Millisecond)
		// The next process raises the floor and the power fails before
		// the raise's fdatasync.
		n = startNode(t, d, Config{})
		floor := filepath.Join(partitionPath("jobs", 0), wire.ConsumerLeaseFileName)
		var crashed *sim.Disk
		d.SetHook(func(c sim.Call) error {
			if c.Op != sim.OpSync || !strings.HasPrefix(c.Path, floor) || crashed != nil {
				return nil // the raise's fdatasync: of the file, or of a temporary beside it
			}
			// The power fails here: the raise's sector torn mid-write.
			crashed = d.Crash(sim.CrashPlan{Data: sim.TearUnsynced, Garbage: true,
				KeepSector: func(string, int64) bool { return false }})
			return syscall.EIO // this process gives nothing more
		})
		if _, err := consume(n); err == nil || crashed == nil {
			t.Fatalf("the consume met no crash at the floor's raise (%v)", err)
		}
		d.SetHook(nil)
		time.Sleep(100 * time.Millisecond)
		n = startNode(t, crashed, Config{})
		c, _, err := n.consumerOf(bg, "jobs", 0)
		if err != nil {
			t.Fatal(err)
		}
		q := n.queues.of(key("jobs", 0), c)
		q.mu.Lock()
		drawn := 0
		for ; drawn <= 4<<20; drawn++ {
			id, err := q.ids.next(n.Node, c.dir)
			if err != nil {
				q.mu.Unlock()
				t.Fatal(err)
			}
			if id+1 >= held.LeaseID {
				break
			}
		}
		q.mu.Unlock()
		t.Logf("%d ids drawn after the crash", drawn)
		again, err := consume(n)
		if err != nil {
			t.Fatal(err)
		}
		checkStaleNack(t, n, "jobs", held, again)
	})
}

// TestReview2_AConsumeWithADeletedIncarnationsProgressKeepsTheLiveLeases:
// a consume that took a partition's consumer progress just before its
// topic was deleted and created again goes on to the queue with that
// progress. The queue of the live incarnation, with its leases, must not
// be replaced by one for the deleted incarnation: the consume's retry
// would then replace that one in turn, with a fresh queue that leases
// again every record the live leases hold.
func TestReview2_AConsumeWithADeletedIncarnationsProgressKeepsTheLiveLeases(t *testing.T) {
	n := startNode(t, nil, Config{})
	makeTopic(t, n, "jobs", 1, 1)
	stale, _, err := n.consumerOf(bg, "jobs", 0) // the consume's first step
	if err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteTopic(bg, "jobs"); err != nil {
		t.Fatal(err)
	}
	makeTopic(t, n, "jobs", 1, 1)
	first, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
	if err != nil || len(first) != 1 {
		t.Fatalf("leased %v, %v", first, err)
	}
	// The consume's next steps, with the progress it held (leaseFrom):
	// its queue, then its lease, which finds that progress dropped; the
	// consume starts over.
	if q := n.queues.of(key("jobs", 0), stale); q != nil {
		if _, err := n.leaseLocked(q, stale, 100, 1<<20, time.Hour); err != errConsumerGone {
			t.Fatalf("a lease with the deleted incarnation's progress: %v, want errConsumerGone", err)
		}
	}
	again, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Fatalf("offset %d leased again (lease %d) while lease %d holds it", again[0].Offset, again[0].LeaseID, first[0].LeaseID)
	}
}

// TestReview2_AReopenHoldsNoEntryPerOffsetOfADamagedRange: a damaged
// frame larger than the acked-ahead set can hold, above a record still
// leased, is passed over in memory (settleUnreadable). The check a
// reopen makes (bindLocked) walks every offset below the queue's next and
// gave each of that range back for redelivery: memory and time in the
// size of the damage (a damaged frame of ten million records: a slice and
// a map of ten million entries, walked under the consumer's lock, which
// every ack waits for), at every reopen of the partition. What it gives
// back must be what the progress lost, never the damage it passed over.
func TestReview2_AReopenHoldsNoEntryPerOffsetOfADamagedRange(t *testing.T) {
	const big = MaxAckedAhead + 10
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{SegmentMaxBytes: 1 << 30})
	makeTopic(t, n, "jobs", 1, 0)
	for _, count := range []int{1, big, 1} { // three frames: 0, 1..big, big+1
		if _, err := n.Produce(bg, "jobs", 0, recs("jobs", 0, 0, count)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.reg.CloseLive(key("jobs", 0)); err != nil { // no frame cached
		t.Fatal(err)
	}
	seg := filepath.Join(partitionPath("jobs", 0), "00000000000000000000.log")
	if err := d.Damage(seg, frameStart(t, d, seg, 1)+40, []byte("rot")); err != nil {
		t.Fatal(err)
	}
	if got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: 1, Lease: time.Hour}); err != nil || len(got) != 1 || got[0].Offset != 0 {
		t.Fatalf("leased %v, %v; want offset 0", got, err)
	}
	got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
	if err != nil || len(got) != 1 || got[0].Offset != big+1 {
		t.Fatalf("leased %v, %v; want offset %d, past the damage", got, err, big+1)
	}
	if err := n.reg.CloseLive(key("jobs", 0)); err != nil { // idle eviction
		t.Fatal(err)
	}
	c, _, err := n.consumerOf(bg, "jobs", 0)
	if err != nil {
		t.Fatal(err)
	}
	q := n.queues.lookup(key("jobs", 0))
	q.mu.Lock() // the next lease's first step (leaseLocked)
	q.bindLocked(c, c.frontierNow())
	given, redeliver := len(q.given), len(q.redeliver)
	q.mu.Unlock()
	if redeliver != 0 || given != 0 {
		t.Fatalf("after the reopen the queue holds %d offsets to redeliver (%d marked given) for a damaged range it passed over; want none",
			redeliver, given)
	}
}

// TestReview2_AnyPartitionConsumeLeasesAcksADamagedFileLost: progress
// recovered with fewer acks than the close wrote (consumer.acked damaged
// on the media meanwhile, fault model rows 8 and 15: the recovery rejects
// it and keeps the slot's lowest offsets) is met by the queue only at its
// next lease. A consume of any partition must not pass over the
// partition as having nothing free before that: the records whose acks
// were lost are neither acked, leased nor given back.
func TestReview2_AnyPartitionConsumeLeasesAcksADamagedFileLost(t *testing.T) {
	const count = 6000
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{SegmentMaxBytes: 1 << 20})
	makeTopic(t, n, "jobs", 2, count)
	for p := range 2 {
		got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: p, MaxRecords: count, MaxBytes: 1 << 30, Lease: time.Hour})
		if err != nil || len(got) != count {
			t.Fatalf("p%d: leased %d, %v", p, len(got), err)
		}
	}
	if err := n.reg.CloseLive(key("jobs", 0)); err != nil { // idle eviction after the lease
		t.Fatal(err)
	}
	ackAllBut(t, n, "jobs", 0, count, 0) // more than a slot holds: the close writes consumer.acked
	if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
		t.Fatal(err)
	}
	acked := filepath.Join(partitionPath("jobs", 0), wire.ConsumerAckedFileName)
	if err := d.Damage(acked, 100, []byte{0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	st, err := n.ConsumerState(bg, "jobs", 0)
	if err != nil {
		t.Fatal(err)
	}
	lost := count - 1 - len(st.AckedAhead)
	if lost == 0 {
		t.Fatal("the test needs acks lost with the file")
	}
	got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: AnyPartition, MaxRecords: count, MaxBytes: 1 << 30, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != lost {
		t.Fatalf("a consume of any partition leased %d records; want the %d whose acks the damaged file lost", len(got), lost)
	}
}
