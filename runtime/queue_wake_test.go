package runtime

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
)

// TestQueue_AWakeUpForAPartitionNotLeasedIsPassedOn: a consume of any
// partition woken for partition 1 that leases from partition 0 instead
// passes the wake-up on, so the consume parked for partition 1 gets its
// record at the commit (found by review).
func TestQueue_AWakeUpForAPartitionNotLeasedIsPassedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 1)
		n := startNode(t, d, Config{})
		makeTopic(t, n, "jobs", 2, 0)
		// The next any-partition consume's rotation starts at partition 0.
		if _, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: AnyPartition}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 1}); err != nil {
			t.Fatal(err)
		}
		// Partition 0: one free record, its consumer state not loaded yet.
		if _, err := n.Produce(bg, "jobs", 0, recs("jobs", 0, 0, 1)); err != nil {
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
		defer d.SetHook(nil)
		a := make(chan consumeResult, 1)
		go func() {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: AnyPartition, MaxRecords: 1, Wait: time.Hour})
			a <- consumeResult{got, err, time.Now()}
		}()
		<-held
		b := make(chan consumeResult, 1)
		go func() {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 1, Wait: time.Hour})
			b <- consumeResult{got, err, time.Now()}
		}()
		synctest.Wait()
		committed := time.Now()
		if _, err := n.Produce(bg, "jobs", 1, recs("jobs", 1, 0, 1)); err != nil { // wakes A, the oldest, for 1
			t.Fatal(err)
		}
		close(release)
		if r := <-a; r.err != nil || len(r.recs) != 1 || r.recs[0].Partition != 0 {
			t.Fatalf("A: %v, %v", r.recs, r.err)
		}
		if r := <-b; r.err != nil || len(r.recs) != 1 || !r.at.Equal(committed) {
			t.Fatalf("B: %d records at +%v (%v); want partition 1's record at the commit", len(r.recs), r.at.Sub(committed), r.err)
		}
	})
}

// TestQueue_ALongPollOutlivingADropIsWokenByTheRecreatedTopic: a consume
// parked across a delete and recreate of its topic behind the node's back
// parks again on the topic's new list, and a commit to the new
// incarnation wakes it (found by review).
//
// The node follows the feed only once both changes are made (held), as a
// node that was slow to follow it, or saw both at once, does: a node that
// looks between them finds no topic, and a consume answering "not found"
// then is right.
func TestQueue_ALongPollOutlivingADropIsWokenByTheRecreatedTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var feed *heldFeed
		n := startNodeWith(t, nil, Config{}, func(ms *LocalMetastore) Metastore {
			feed = &heldFeed{Metastore: ms}
			return feed
		})
		makeTopic(t, n, "jobs", 1, 0)
		a := make(chan consumeResult, 1)
		go func() {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, Wait: time.Hour})
			a <- consumeResult{got, err, time.Now()}
		}()
		synctest.Wait()
		feed.hold()
		n.ms.DeleteTopic(bg, "jobs")
		if _, _, err := n.ms.CreateTopic(bg, "jobs", 1, Retention{}); err != nil {
			t.Fatal(err)
		}
		feed.release()
		n.background.Wait()
		synctest.Wait()
		committed := time.Now()
		if _, err := n.Produce(bg, "jobs", 0, recs("jobs", 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		if r := <-a; r.err != nil || len(r.recs) != 1 || !r.at.Equal(committed) {
			t.Fatalf("A: %d records at +%v (%v); want the record at the commit", len(r.recs), r.at.Sub(committed), r.err)
		}
	})
}

// TestCursor_OnATopicWithoutAnIncarnationID: a topic whose record has no
// incarnation id (its directory has no marker) takes cursors like any
// other (found by review: the marker check refused them).
func TestCursor_OnATopicWithoutAnIncarnationID(t *testing.T) {
	d := newTestDisk(t, 1)
	local, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{DataDir: dataDir, FS: d, Metastore: noIncarnation{local}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	makeTopic(t, &testNode{Node: n, disk: d, ms: local}, "legacy", 1, 3)
	if _, err := n.CreateCursor(bg, "legacy", "audit", CursorEarliest); err != nil {
		t.Fatalf("CreateCursor on a topic without an incarnation id: %v", err)
	}
	if res, err := n.ReadCursor(bg, "legacy", "audit", 0, 10, 1<<20, true); err != nil || len(res.Records) != 3 {
		t.Fatalf("ReadCursor: %d records, %v", len(res.Records), err)
	}
}

// heldFeed is a metastore whose change feed can be held: changes made
// while it is held reach the subscribers at release, in order.
type heldFeed struct {
	Metastore
	mu      sync.Mutex
	held    bool
	pending []func()
}

func (h *heldFeed) Subscribe(f func(topic string)) func() {
	return h.Metastore.Subscribe(func(topic string) {
		h.mu.Lock()
		if h.held {
			h.pending = append(h.pending, func() { f(topic) })
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		f(topic)
	})
}

func (h *heldFeed) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = true
}

func (h *heldFeed) release() {
	h.mu.Lock()
	pending := h.pending
	h.held, h.pending = false, nil
	h.mu.Unlock()
	for _, f := range pending {
		f()
	}
}
