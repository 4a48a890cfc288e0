package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
)

// queueRecord names a record of a topic.
type queueRecord struct{ p, o int }

// leaseLedger is what queue consumers of a test were given: each
// record's deliveries not settled yet (by lease id), and the records
// acked. A delivery of a record whose earlier delivery is not settled is
// checked against the partition's owner: the earlier lease must be dead
// (an extension of it extends nothing), or the record was under two live
// leases at once.
type leaseLedger struct {
	c     *client.Client
	topic string

	mu        sync.Mutex
	open      map[queueRecord][]uint64
	acked     map[queueRecord]bool
	delivered int
	problems  []string
	done      chan struct{} // closed once want records are acked
	want      int
}

func newLeaseLedger(c *client.Client, topic string, want int) *leaseLedger {
	return &leaseLedger{c: c, topic: topic, open: map[queueRecord][]uint64{}, acked: map[queueRecord]bool{}, done: make(chan struct{}), want: want}
}

// received checks and records a delivery.
func (l *leaseLedger) received(ctx context.Context, m *client.Message) {
	r := queueRecord{m.Partition, int(m.Offset)}
	l.mu.Lock()
	earlier := append([]uint64(nil), l.open[r]...)
	l.open[r] = append(l.open[r], m.LeaseID)
	l.delivered++
	if want := fmt.Sprintf("%s/%d/%d", l.topic, r.p, r.o); string(m.Value) != want {
		l.problems = append(l.problems, fmt.Sprintf("%v holds %q, want %q", r, m.Value, want))
	}
	l.mu.Unlock()
	for _, id := range earlier {
		n, _, err := l.c.ExtendLease(ctx, l.topic, r.p, id, 30*time.Second, int64(r.o))
		l.mu.Lock()
		switch {
		case err != nil:
			l.problems = append(l.problems, fmt.Sprintf("%v: extending its earlier lease %d: %v", r, id, err))
		case n != 0:
			l.problems = append(l.problems, fmt.Sprintf("%v delivered under lease %d while its lease %d was live", r, m.LeaseID, id))
		}
		l.mu.Unlock()
	}
}

// settled records m acked (a delivery after it is of a settled record).
func (l *leaseLedger) settled(m *client.Message) {
	r := queueRecord{m.Partition, int(m.Offset)}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open[r] = nil // an ack settles the record, whatever lease it was under
	l.acked[r] = true
	if len(l.acked) == l.want {
		select {
		case <-l.done:
		default:
			close(l.done)
		}
	}
}

// work receives from q and acks at once until ctx ends.
func (l *leaseLedger) work(ctx context.Context, q *client.QueueConsumer) error {
	for {
		msgs, err := q.Receive(ctx)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			l.received(ctx, m)
		}
		if err := q.Ack(ctx, msgs...); err != nil {
			return err
		}
		for _, m := range msgs {
			l.settled(m)
		}
	}
}

// finish waits until every record is acked, the workers end with ctx's
// end or fail.
func (l *leaseLedger) finish(t *testing.T, ctx context.Context, errs <-chan error) {
	t.Helper()
	select {
	case <-l.done:
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		var missing []queueRecord
		for r := range l.open {
			if !l.acked[r] {
				missing = append(missing, r)
			}
		}
		t.Fatalf("%d of %d records acked (%d deliveries) by the test's deadline; delivered and not acked: %v", len(l.acked), l.want, l.delivered, missing)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.problems) > 0 {
		t.Fatal(l.problems)
	}
}

// settledEverywhere checks that no partition has a record not acked, or
// leased, on its owner.
func settledEverywhere(t *testing.T, c *client.Client, topic string, partitions, per int) {
	t.Helper()
	for p := range partitions {
		st, err := c.Consumer(bg, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Lag != 0 || st.Leased != 0 || st.Frontier != int64(per) {
			t.Fatalf("partition %d: %+v; want its %d records acked, none leased", p, st, per)
		}
	}
}

// TestCluster_AQueueConsumerCoversEveryOwner: a queue consumer made
// through one node of three leases every record of a topic whose
// partitions the three own (one consume in flight to each owner), each
// once, and its acks settle them on their owners.
func TestCluster_AQueueConsumerCoversEveryOwner(t *testing.T) {
	te := startEtcd(t)
	nodes := startNodes(t, te, "a", "b", "c")
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	const partitions, per = 6, 10
	c := nodes[0].client()
	if _, _, err := c.CreateTopic(bg, "jobs", partitions, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owner := owners(t, watch, heard, "jobs", partitions)
	spread := map[string]bool{}
	for _, o := range owner {
		spread[o] = true
	}
	if len(spread) != 3 {
		t.Fatalf("6 partitions over a, b and c: %v", owner)
	}
	produceEach(t, nodes, "jobs", partitions, 0, per)

	ctx, cancel := context.WithTimeout(bg, time.Minute) // a record never delivered fails the test, never hangs it
	defer cancel()
	q, err := c.NewQueueConsumer(ctx, "jobs", client.QueueConsumerOptions{MaxRecords: 7, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ledger := newLeaseLedger(c, "jobs", partitions*per)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ledger.work(ctx, q); err != nil && ctx.Err() == nil {
			errs <- err
		}
	})
	ledger.finish(t, ctx, errs)
	cancel()
	wg.Wait()
	if err := q.Close(bg); err != nil {
		t.Fatal(err)
	}
	if ledger.delivered != partitions*per {
		t.Fatalf("%d deliveries of %d records; want each once", ledger.delivered, partitions*per)
	}
	settledEverywhere(t, c, "jobs", partitions, per)
}

// TestCluster_AQueueConsumerHoldsRecordsAcrossAMove: a queue consumer
// made through a partition's owner holds records of it unsettled, with a
// short lease it renews, and leases nothing more (MaxInWork) while the
// partition moves to another node; more records are produced, and two
// consumers made after the move (through two nodes) work the topic:
// every record, those held and those produced after the move, is acked;
// a record delivered again while an earlier delivery is held was under a
// lease dead by then (the old owner's leases do not move), never two live
// leases at once; the held records' old leases are dead on the new
// owner. A consumer leasing through the move is
// TestCluster_AQueueConsumerFollowsAMoveToANewOwner's.
func TestCluster_AQueueConsumerHoldsRecordsAcrossAMove(t *testing.T) {
	te := startEtcd(t)
	nodes := startNodes(t, te, "a", "b", "c")
	byID := map[string]*node{}
	for _, d := range nodes {
		byID[d.id] = d
	}
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	const partitions = 3
	if _, _, err := nodes[0].client().CreateTopic(bg, "jobs", partitions, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owner := owners(t, watch, heard, "jobs", partitions)
	from, to := owner[0], ""
	for _, d := range nodes {
		if d.id != from && (to == "" || d.id != owner[1]) {
			to = d.id
		}
	}
	produceEach(t, nodes, "jobs", partitions, 0, 20)

	ctx, cancel := context.WithTimeout(bg, time.Minute) // a record never delivered fails the test, never hangs it
	defer cancel()
	c := byID[from].client()
	ledger := newLeaseLedger(c, "jobs", partitions*30)
	holder, err := c.NewQueueConsumer(ctx, "jobs", client.QueueConsumerOptions{MaxRecords: 3, MaxInWork: 3, Lease: 3 * time.Second, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var held []*client.Message // of partition 0, leased by its first owner
	for len(held) < 3 {
		msgs, err := holder.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			ledger.received(ctx, m)
			if m.Partition == 0 {
				held = append(held, m)
			} else if err := m.Nack(ctx); err != nil { // for the workers
				t.Fatal(err)
			} else {
				ledger.mu.Lock()
				ledger.open[queueRecord{m.Partition, int(m.Offset)}] = nil
				ledger.mu.Unlock()
			}
		}
	}

	if _, err := nodes[0].client().MovePartition(bg, "jobs", 0, to); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "the move to complete", func() bool {
		o, _ := watch.Owner("jobs", 0)
		return o == to && len(watch.Moves()) == 0
	})
	produceEach(t, nodes, "jobs", partitions, 20, 10)

	errs := make(chan error, 2)
	var wg sync.WaitGroup
	var workers []*client.QueueConsumer
	for _, through := range []*node{byID[from], byID[to]} {
		q, err := through.client().NewQueueConsumer(ctx, "jobs", client.QueueConsumerOptions{MaxRecords: 4, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, q)
		wg.Go(func() {
			if err := ledger.work(ctx, q); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	ledger.finish(t, ctx, errs)
	cancel()
	wg.Wait()
	for _, q := range append(workers, holder) {
		if err := q.Close(bg); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range held {
		if n, _, err := c.ExtendLease(bg, "jobs", 0, m.LeaseID, time.Second, m.Offset); err != nil || n != 0 {
			t.Fatalf("record 0/%d's lease %d from %s, on %s after the move: extended %d, %v; want it dead", m.Offset, m.LeaseID, from, to, n, err)
		}
	}
	settledEverywhere(t, c, "jobs", partitions, 30)
}

// TestCluster_AQueueConsumerFollowsAMoveToANewOwner: a queue consumer
// works a topic of two partitions from before one of them moves to the
// node that owned neither, through the move and after it: the records
// produced before and after the move (on the new owner, a node the
// consumer had no consume loop for) are each acked, never under two live
// leases at once, within a minute.
func TestCluster_AQueueConsumerFollowsAMoveToANewOwner(t *testing.T) {
	te := startEtcd(t)
	nodes := startNodes(t, te, "a", "b", "c")
	byID := map[string]*node{}
	for _, d := range nodes {
		byID[d.id] = d
	}
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	const partitions = 2
	if _, _, err := nodes[0].client().CreateTopic(bg, "jobs", partitions, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owner := owners(t, watch, heard, "jobs", partitions)
	from, to := owner[0], ""
	for _, d := range nodes {
		if d.id != owner[0] && d.id != owner[1] {
			to = d.id
		}
	}
	produceEach(t, nodes, "jobs", partitions, 0, 20)

	ctx, cancel := context.WithTimeout(bg, time.Minute) // a record never delivered fails the test, never hangs it
	defer cancel()
	c := byID[from].client()
	ledger := newLeaseLedger(c, "jobs", partitions*30)
	q, err := c.NewQueueConsumer(ctx, "jobs", client.QueueConsumerOptions{MaxRecords: 3, Lease: 3 * time.Second, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ledger.work(ctx, q); err != nil && ctx.Err() == nil {
			errs <- err
		}
	})

	if _, err := nodes[0].client().MovePartition(bg, "jobs", 0, to); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "the move to complete", func() bool {
		o, _ := watch.Owner("jobs", 0)
		return o == to && len(watch.Moves()) == 0
	})
	produceEach(t, nodes, "jobs", partitions, 20, 10)

	ledger.finish(t, ctx, errs)
	cancel()
	wg.Wait()
	if err := q.Close(bg); err != nil {
		t.Fatal(err)
	}
	settledEverywhere(t, c, "jobs", partitions, 30)
}
