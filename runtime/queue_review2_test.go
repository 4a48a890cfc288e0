package runtime

import (
	"path/filepath"
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
