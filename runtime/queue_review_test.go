package runtime

import (
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// Regressions found by the outside review of the queue consume (wave 2),
// one test each: acks kept by every clean close, a queue never built from
// a consumer an install replaced, lease ids that never repeat.

// ackAllBut acks offsets [0, n) of a partition but skip, in one call.
func ackAllBut(t *testing.T, n *testNode, topic string, p int, count, skip int64) {
	t.Helper()
	var offsets []int64
	for o := range count {
		if o != skip {
			offsets = append(offsets, o)
		}
	}
	if _, err := n.Ack(bg, topic, p, offsets...); err != nil {
		t.Fatal(err)
	}
}

// TestQueue_AnEvictionKeepsEveryAck: the review's case. With a budget of
// one open log, 6,000 records leased and every offset but the first
// acked (more than a consumer.ahead slot holds), another partition's open
// evicts the log; the first ack after it moves the frontier past every
// record, no lag is left and nothing is leased again (docs/design.md,
// "Consumer progress": a clean close keeps every ack).
func TestQueue_AnEvictionKeepsEveryAck(t *testing.T) {
	const count = 6000
	n := startNode(t, nil, Config{MaxOpenLogs: 1, SegmentMaxBytes: 1 << 20})
	makeTopic(t, n, "jobs", 1, count)
	makeTopic(t, n, "other", 1, 0)
	got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: count, MaxBytes: 1 << 30, Lease: time.Hour})
	if err != nil || len(got) != count {
		t.Fatalf("leased %d, %v", len(got), err)
	}
	ackAllBut(t, n, "jobs", 0, count, 0)
	if err := retryBusy(func() error { _, err := n.Produce(bg, "other", 0, recs("other", 0, 0, 1)); return err }); err != nil {
		t.Fatal(err)
	}
	if _, open := n.reg.Lookup(key("jobs", 0)); open {
		t.Fatal("jobs/0 was not evicted by the budget of one log")
	}
	var frontier int64
	if err := retryBusy(func() (err error) { frontier, err = n.Ack(bg, "jobs", 0, 0); return err }); err != nil {
		t.Fatal(err)
	}
	st, err := n.ConsumerState(bg, "jobs", 0)
	if err != nil {
		t.Fatal(err)
	}
	if frontier != count || st.Lag != 0 {
		t.Fatalf("after the eviction: frontier %d, lag %d; want %d, 0", frontier, st.Lag, count)
	}
	again, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: count, Lease: time.Hour})
	if err != nil || len(again) != 0 {
		t.Fatalf("leased %d acked records again (%v)", len(again), err)
	}
}

// TestConsumer_ACleanCloseKeepsEveryAckAcrossARestart: an acked-ahead set
// larger than a consumer.ahead slot holds comes back whole after a clean
// close of the node; the acks made after the restart are kept by the next
// clean close too.
func TestConsumer_ACleanCloseKeepsEveryAckAcrossARestart(t *testing.T) {
	const count = 6000
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{SegmentMaxBytes: 1 << 20})
	makeTopic(t, n, "jobs", 1, count)
	ackAllBut(t, n, "jobs", 0, count/2, 0)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, d, Config{SegmentMaxBytes: 1 << 20})
	// Half of the set after the restart: written, with the half before,
	// by the next close.
	var later []int64
	for o := int64(count / 2); o < count; o++ {
		later = append(later, o)
	}
	if _, err := n.Ack(bg, "jobs", 0, later...); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, d, Config{SegmentMaxBytes: 1 << 20})
	st, err := n.ConsumerState(bg, "jobs", 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Frontier != 0 || len(st.AckedAhead) != count-1 {
		t.Fatalf("after two restarts: frontier %d with %d acked ahead; want 0 with %d", st.Frontier, len(st.AckedAhead), count-1)
	}
	if frontier, err := n.Ack(bg, "jobs", 0, 0); err != nil || frontier != count {
		t.Fatalf("the first ack: frontier %d (%v), want %d", frontier, err, count)
	}
}

// TestQueue_AcksACloseFailedToWriteAreLeasedAgain: whatever the persisted
// state, the queue never holds an offset that is neither acked, leased
// nor waiting for redelivery. Acks a close could not write out (EIO) are
// gone from the recovered progress; the queue, which outlived the close,
// leases those records again instead of passing over them.
func TestQueue_AcksACloseFailedToWriteAreLeasedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 1)
		n := startNode(t, d, Config{})
		makeTopic(t, n, "jobs", 1, 10)
		got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: 10, Lease: time.Hour})
		if err != nil || len(got) != 10 {
			t.Fatalf("leased %d, %v", len(got), err)
		}
		if _, err := n.Ack(bg, "jobs", 0, 5, 6, 7, 8, 9); err != nil {
			t.Fatal(err)
		}
		// No tick ran (the bubble's clock stands still): the close's own
		// write of consumer.ahead is the only one, and it fails.
		ahead := filepath.Join(partitionPath("jobs", 0), wire.ConsumerAheadFileName)
		d.Inject(sim.Fault{Op: sim.OpWrite, Path: ahead, Err: syscall.EIO})
		if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
			t.Fatal(err)
		}
		if st, err := n.ConsumerState(bg, "jobs", 0); err != nil || len(st.AckedAhead) != 0 {
			t.Fatalf("recovered %+v (%v); the test needs the acks lost", st, err)
		}
		again, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: 10, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		var offsets []int64
		for _, r := range again {
			offsets = append(offsets, r.Offset)
		}
		if !slices.Equal(offsets, []int64{5, 6, 7, 8, 9}) {
			t.Fatalf("leased %v after the acks were lost; want 5..9 again (0..4 are still leased)", offsets)
		}
	})
}

// TestQueue_AConsumeRacingAnInstallLeasesTheInstalledRecords: a consume
// that took the partition's consumer progress just before an install
// replaced it goes on to its queue with the replaced progress; the queue
// must not take its position from it, or the installed records below
// the replaced frontier are never leased.
func TestQueue_AConsumeRacingAnInstallLeasesTheInstalledRecords(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	files, rec := installFixture(t, n) // 10 records in the files, 20 in the log
	var all []int64
	for o := range int64(20) {
		all = append(all, o)
	}
	if _, err := n.Ack(bg, "orders", 0, all...); err != nil {
		t.Fatal(err)
	}
	k := key("orders", 0)
	held, _, err := n.consumerOf(bg, "orders", 0) // the consume's first step
	if err != nil {
		t.Fatal(err)
	}
	if err := n.InstallPartition(bg, "orders", 0, rec.Incarnation, files); err != nil {
		t.Fatal(err)
	}
	// The consume's next steps, with the progress it held: its queue,
	// then its lease, which finds that progress settled and starts over.
	q := n.queues.of(k, held)
	if _, err := n.leaseLocked(q, held, 100, 1<<20, time.Hour); err != errConsumerGone {
		t.Fatalf("a lease with the replaced progress: %v, want errConsumerGone", err)
	}
	got, err := n.Consume(bg, "orders", ConsumeOptions{Partition: 0, MaxRecords: 100, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || got[0].Offset != 0 {
		first := int64(-1)
		if len(got) > 0 {
			first = got[0].Offset
		}
		t.Fatalf("after the install: leased %d records from offset %d; want the 10 installed, from 0", len(got), first)
	}
}

// movedFiles lists a partition's files as a move's new owner copies
// them: every file of the listing (segments, consumer progress), the
// boundary and the cursors' positions, taken after the log's close.
func movedFiles(t *testing.T, n *testNode, topic string, p int) []InstallFile {
	t.Helper()
	if err := n.reg.CloseLive(key(topic, p)); err != nil {
		t.Fatal(err)
	}
	listing, err := n.TransferListing(bg, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	var files []InstallFile
	for _, s := range append(listing.Segments, listing.Consumer...) {
		b, err := n.disk.Contents(filepath.Join(partitionPath(topic, p), s.Name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, InstallFile{Name: s.Name, Data: b})
	}
	hwm, _ := wire.EncodeOffsetFile(listing.HighWatermark)
	return append(files, InstallFile{Name: wire.HWMFileName, Data: hwm[:]})
}

// checkStaleNack: a nack of lease stale (taken before a restart or a
// move) gives back nothing of the lease fresh holds on the same record,
// and no third consume gets that record while fresh's lease holds.
func checkStaleNack(t *testing.T, n *testNode, topic string, stale, fresh LeasedRecord) {
	t.Helper()
	if stale.LeaseID == fresh.LeaseID {
		t.Errorf("lease id %d given again, for offset %d", fresh.LeaseID, fresh.Offset)
	}
	if given, err := n.Nack(bg, topic, fresh.Partition, stale.LeaseID, stale.Offset); err != nil || given != 0 {
		t.Errorf("the stale nack gave back %d (%v): another consumer's live lease", given, err)
	}
	if third, err := n.Consume(bg, topic, ConsumeOptions{Partition: fresh.Partition, Lease: time.Hour}); err != nil || len(third) != 0 {
		t.Errorf("a third consume leased %d records (%v) while the lease holds", len(third), err)
	}
}

// TestQueue_LeaseIDsNeverRepeatAcrossARestart: the review's case. A
// record leased before a restart and leased again after it, at the same
// instant of the clock, gets another lease id, so the first consumer's
// late nack cannot give back the second's lease.
func TestQueue_LeaseIDsNeverRepeatAcrossARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 1)
		n := startNode(t, d, Config{})
		makeTopic(t, n, "jobs", 1, 1)
		before, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
		if err != nil || len(before) != 1 {
			t.Fatalf("before: %v, %v", before, err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		n = startNode(t, d, Config{})
		after, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
		if err != nil || len(after) != 1 {
			t.Fatalf("after: %v, %v", after, err)
		}
		checkStaleNack(t, n, "jobs", before[0], after[0])
	})
}

// TestQueue_LeaseIDsNeverRepeatAcrossAMove: a partition moved to another
// node (its files installed there) never gets a lease id there that its
// old owner gave, though both nodes started at the same instant.
func TestQueue_LeaseIDsNeverRepeatAcrossAMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := startNode(t, nil, Config{})
		makeTopic(t, src, "jobs", 1, 1)
		rec, _, _ := src.ms.Topic(bg, "jobs")
		dst := startNode(t, nil, Config{})
		makeTopic(t, dst, "jobs", 1, 0)
		dst.ms.mu.Lock() // the target learns the source's record, as a metastore replica would
		r := dst.ms.topics["jobs"]
		r.Incarnation = rec.Incarnation
		dst.ms.topics["jobs"] = r
		dst.ms.mu.Unlock()
		before, err := src.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
		if err != nil || len(before) != 1 {
			t.Fatalf("before: %v, %v", before, err)
		}
		if err := dst.InstallPartition(bg, "jobs", 0, rec.Incarnation, movedFiles(t, src, "jobs", 0)); err != nil {
			t.Fatal(err)
		}
		after, err := dst.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour})
		if err != nil || len(after) != 1 {
			t.Fatalf("after: %v, %v", after, err)
		}
		checkStaleNack(t, dst, "jobs", before[0], after[0])
	})
}
