package runtime

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Tests of docs/design.md, "Queue consume": extending a lease.

// leaseOne leases the one record of jobs/0 for lease.
func leaseOne(t *testing.T, n *testNode, lease time.Duration) LeasedRecord {
	t.Helper()
	got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: lease})
	if err != nil || len(got) != 1 {
		t.Fatalf("consume: %v, %v; want one record", got, err)
	}
	return got[0]
}

// park parks a consumer of jobs/0 and returns a channel that gets when
// it leased records and what; it is parked when park returns (a lease
// attempt of its own re-arms the expiry timer: parked first, it does not).
func park(t *testing.T, n *testNode) <-chan consumeResult {
	t.Helper()
	ch := make(chan consumeResult, 1)
	go func() {
		got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: time.Hour, Wait: 24 * time.Hour})
		ch <- consumeResult{got, err, time.Now()}
	}()
	synctest.Wait()
	return ch
}

// wokenAt waits for a consumer park parked.
func wokenAt(t *testing.T, ch <-chan consumeResult) (time.Time, []LeasedRecord) {
	t.Helper()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.at, r.recs
}

// TestExtend_AnExtendedRecordIsGivenBackAtItsNewDeadlineNotItsOld: a
// record leased for 10 s and extended at 5 s by 20 s is not given back
// at 10 s: a consumer parked for it is woken at 25 s, by the expiry.
func TestExtend_AnExtendedRecordIsGivenBackAtItsNewDeadlineNotItsOld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 1, 1)
		start := time.Now()
		r := leaseOne(t, n, 10*time.Second)
		parked := park(t, n)
		<-time.After(5 * time.Second)
		if got, err := n.ExtendLease(bg, "jobs", 0, r.LeaseID, 20*time.Second, r.Offset); err != nil || got != 1 {
			t.Fatalf("extend: %d, %v; want 1", got, err)
		}
		at, got := wokenAt(t, parked)
		if at.Sub(start) != 25*time.Second || len(got) != 1 || got[0].Offset != r.Offset {
			t.Fatalf("redelivered %v at +%v; want offset %d at +25s", got, at.Sub(start), r.Offset)
		}
	})
}

// TestExtend_AShorterLeaseGivesTheRecordBackAtItsEarlierDeadline: a
// record leased for an hour and "extended" to 5 s is given back at 5 s,
// not at the hour the expiry timer was first set for.
func TestExtend_AShorterLeaseGivesTheRecordBackAtItsEarlierDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 1, 1)
		start := time.Now()
		r := leaseOne(t, n, time.Hour)
		parked := park(t, n)
		if got, err := n.ExtendLease(bg, "jobs", 0, r.LeaseID, 5*time.Second, r.Offset); err != nil || got != 1 {
			t.Fatalf("extend: %d, %v; want 1", got, err)
		}
		at, got := wokenAt(t, parked)
		if at.Sub(start) != 5*time.Second || len(got) != 1 {
			t.Fatalf("redelivered %v at +%v; want the record at +5s", got, at.Sub(start))
		}
	})
}

// TestExtend_AfterExpiryExtendsNothing: at its deadline a lease is
// over: its extension extends nothing and the record goes to the next
// consumer, whose lease a late extension under the old id leaves alone.
func TestExtend_AfterExpiryExtendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 1, 1)
		first := leaseOne(t, n, 10*time.Second)
		<-time.After(10 * time.Second)
		if got, err := n.ExtendLease(bg, "jobs", 0, first.LeaseID, time.Hour, first.Offset); err != nil || got != 0 {
			t.Fatalf("extend at the deadline: %d, %v; want 0", got, err)
		}
		second := leaseOne(t, n, 10*time.Second)
		if second.Offset != first.Offset || second.LeaseID == first.LeaseID {
			t.Fatalf("second consumer got %+v", second)
		}
		if got, err := n.ExtendLease(bg, "jobs", 0, first.LeaseID, time.Hour, first.Offset); err != nil || got != 0 {
			t.Fatalf("late extend under the first lease: %d, %v; want 0", got, err)
		}
		start := time.Now()
		at, got := wokenAt(t, park(t, n))
		if at.Sub(start) != 10*time.Second || len(got) != 1 {
			t.Fatalf("redelivered %v at +%v; want the record at the second lease's 10 s", got, at.Sub(start))
		}
	})
}

// TestExtend_AWrongLeaseIDExtendsNothing: an extension under another id
// extends nothing, and the record is given back at its own deadline.
func TestExtend_AWrongLeaseIDExtendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 1, 1)
		start := time.Now()
		r := leaseOne(t, n, 10*time.Second)
		parked := park(t, n)
		if got, err := n.ExtendLease(bg, "jobs", 0, r.LeaseID+1, time.Hour, r.Offset); err != nil || got != 0 {
			t.Fatalf("extend under another id: %d, %v; want 0", got, err)
		}
		at, got := wokenAt(t, parked)
		if at.Sub(start) != 10*time.Second || len(got) != 1 {
			t.Fatalf("redelivered %v at +%v; want the record at +10s", got, at.Sub(start))
		}
	})
}

// TestExtend_SettledRecordsAreNotExtended: an acked record and a nacked
// one are not extended (nor are offsets never leased); the nacked one is
// leased again at once.
func TestExtend_SettledRecordsAreNotExtended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 1, 3)
		got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Lease: 10 * time.Second})
		if err != nil || len(got) != 3 {
			t.Fatalf("consume: %v, %v", got, err)
		}
		id := got[0].LeaseID
		if _, err := n.Ack(bg, "jobs", 0, 0); err != nil {
			t.Fatal(err)
		}
		if given, err := n.Nack(bg, "jobs", 0, id, 1); err != nil || given != 1 {
			t.Fatalf("nack: %d, %v", given, err)
		}
		if ext, err := n.ExtendLease(bg, "jobs", 0, id, time.Hour, 0, 1, 2, 99); err != nil || ext != 1 {
			t.Fatalf("extend of 0 (acked), 1 (nacked), 2 (leased), 99 (never): %d, %v; want 1", ext, err)
		}
		again, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0})
		if err != nil || len(again) != 1 || again[0].Offset != 1 {
			t.Fatalf("after the extension: %v, %v; want offset 1 alone", again, err)
		}
	})
}

// TestExtend_LeaseBounds: a lease under a millisecond or past MaxLease is
// refused (ErrBadLease) and extends nothing; MaxLease itself is taken.
func TestExtend_LeaseBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 1, 1)
		r := leaseOne(t, n, 10*time.Second)
		for _, bad := range []time.Duration{0, -time.Second, time.Millisecond - 1, MaxLease + time.Millisecond} {
			if got, err := n.ExtendLease(bg, "jobs", 0, r.LeaseID, bad, r.Offset); !errors.Is(err, ErrBadLease) || got != 0 {
				t.Errorf("extend by %v: %d, %v; want ErrBadLease", bad, got, err)
			}
		}
		if got, err := n.ExtendLease(bg, "jobs", 0, r.LeaseID, MaxLease, r.Offset); err != nil || got != 1 {
			t.Fatalf("extend by MaxLease: %d, %v; want 1", got, err)
		}
		if _, err := n.ExtendLease(bg, "nope", 0, r.LeaseID, time.Second, r.Offset); !errors.Is(err, ErrTopicNotFound) {
			t.Errorf("extend on a missing topic: %v", err)
		}
		if _, err := n.ExtendLease(bg, "jobs", 1, r.LeaseID, time.Second, r.Offset); !errors.Is(err, ErrPartitionNotFound) {
			t.Errorf("extend on a missing partition: %v", err)
		}
	})
}

// TestExtend_AnOffsetNamedTwiceCountsOnce: extended counts records, as a
// nack's given back does: a record named twice is one; a client that
// compares the count with its distinct offsets is never told a lease
// that ran out is still its own.
func TestExtend_AnOffsetNamedTwiceCountsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 1, 1)
		r := leaseOne(t, n, 10*time.Second)
		if got, err := n.ExtendLease(bg, "jobs", 0, r.LeaseID, time.Minute, r.Offset, r.Offset, r.Offset+1); err != nil || got != 1 {
			t.Fatalf("extend [o, o, o+1] with o leased: %d, %v; want 1", got, err)
		}
	})
}
