package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.Cleanup(func(code int) {
			if daemonDir != "" {
				os.RemoveAll(daemonDir) // the daemon's build
			}
			os.Exit(code)
		}),
		// the etcd server's and gRPC's own background goroutines, which
		// outlive a closed server by design
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	)
}

// openMetastore opens node's metastore on te's etcd; the test closes it.
func openMetastore(t testing.TB, te *testEtcd, node string) *cluster.EtcdMetastore {
	t.Helper()
	m, err := cluster.OpenEtcdMetastore(bg, cluster.Config{Client: te.client(), NodeID: node, ProgressInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("open the metastore of %s: %v", node, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// changes collects the topic names a metastore's subscribers hear.
type changes struct {
	mu    sync.Mutex
	heard map[string]int
	wake  chan struct{}
}

func subscribe(m *cluster.EtcdMetastore) *changes {
	c := &changes{heard: map[string]int{}, wake: make(chan struct{}, 1)}
	m.Subscribe(func(topic string) {
		c.mu.Lock()
		c.heard[topic]++
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
	})
	return c
}

// count is how many times topic was heard to change.
func (c *changes) count(topic string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.heard[topic]
}

// waitFor waits until cond holds, re-checking at every change heard.
func (c *changes) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-c.wake:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// waitCaughtUp waits until m's CaughtUp is want.
func waitCaughtUp(t *testing.T, m *cluster.EtcdMetastore, want bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	for {
		changed := m.CaughtUpChanged()
		if m.CaughtUp() == want {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waiting for CaughtUp to be %v: %v", want, ctx.Err())
		}
	}
}

// TestEtcdMetastore_TopicRecords: create, read back at once (the replica
// holds a change before it returns), create again (the record as it is),
// change retention (the version moves), delete, and the errors of a topic
// that is not there.
func TestEtcdMetastore_TopicRecords(t *testing.T) {
	te := startEtcd(t)
	m := openMetastore(t, te, "a")
	rec, created, err := m.CreateTopic(bg, "orders", 3, runtime.Retention{Ms: 1000})
	if err != nil || !created || rec.Incarnation == "" || rec.Version == 0 || rec.Partitions != 3 {
		t.Fatalf("create: %+v, created %v, %v", rec, created, err)
	}
	if got, ok, err := m.Topic(bg, "orders"); err != nil || !ok || got != rec {
		t.Fatalf("topic right after its create: %+v, %v, %v; want %+v", got, ok, err, rec)
	}
	again, created, err := m.CreateTopic(bg, "orders", 5, runtime.Retention{})
	if err != nil || created || again != rec {
		t.Fatalf("create again: %+v, created %v, %v; want the record as it is, %+v", again, created, err, rec)
	}
	changed, err := m.UpdateRetention(bg, "orders", func(r runtime.Retention) (runtime.Retention, error) {
		r.Bytes = 1 << 30
		return r, nil
	})
	if err != nil || changed.Incarnation != rec.Incarnation || changed.RetentionMs != 1000 || changed.RetentionBytes != 1<<30 || changed.Version <= rec.Version {
		t.Fatalf("update retention: %+v, %v (was %+v)", changed, err, rec)
	}
	if got, _, _ := m.Topic(bg, "orders"); got != changed {
		t.Fatalf("topic after the change: %+v, want %+v", got, changed)
	}
	refuse := errors.New("no")
	if _, err := m.UpdateRetention(bg, "orders", func(runtime.Retention) (runtime.Retention, error) { return runtime.Retention{}, refuse }); !errors.Is(err, refuse) {
		t.Fatalf("a refused change: %v", err)
	}
	if _, _, err := m.CreateTopic(bg, "payments", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	if all, err := m.Topics(bg); err != nil || len(all) != 2 || all[0].Name != "orders" || all[1].Name != "payments" {
		t.Fatalf("topics: %+v, %v", all, err)
	}
	if err := m.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := m.Topic(bg, "orders"); ok {
		t.Fatal("a deleted topic is still served")
	}
	if err := m.DeleteTopic(bg, "orders"); !errors.Is(err, runtime.ErrTopicNotFound) {
		t.Fatalf("delete of a deleted topic: %v", err)
	}
	if _, err := m.UpdateRetention(bg, "orders", func(r runtime.Retention) (runtime.Retention, error) { return r, nil }); !errors.Is(err, runtime.ErrTopicNotFound) {
		t.Fatalf("retention of a deleted topic: %v", err)
	}
	if _, _, err := m.CreateTopic(bg, "bad/name", 1, runtime.Retention{}); err == nil {
		t.Fatal("a topic name with a slash was taken")
	}
	// What no node may read back is never written: partitions a directory
	// name cannot hold, a negative retention. Asked of etcd itself: the
	// replica leaves such a record out, so it cannot tell.
	for _, partitions := range []int{0, wire.MaxPartitions + 1} {
		if _, _, err := m.CreateTopic(bg, "wide", partitions, runtime.Retention{}); err == nil {
			t.Fatalf("a topic of %d partitions was created", partitions)
		}
	}
	if got, err := te.client().Get(bg, "/narad/topics/wide"); err != nil || got.Count != 0 {
		t.Fatalf("a refused topic's record in etcd: %+v, %v", got, err)
	}
	before, err := te.client().Get(bg, "/narad/topics/payments")
	if err != nil || before.Count != 1 {
		t.Fatalf("payments in etcd: %+v, %v", before, err)
	}
	if _, err := m.UpdateRetention(bg, "payments", func(r runtime.Retention) (runtime.Retention, error) {
		r.Ms = -1
		return r, nil
	}); err == nil {
		t.Fatal("a negative retention was taken")
	}
	if after, err := te.client().Get(bg, "/narad/topics/payments"); err != nil || after.Count != 1 || after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Fatalf("payments in etcd after a refused change: %+v, %v (was %+v)", after, err, before)
	}
}

// TestEtcdMetastore_AnotherNodeFollowsThroughItsWatch: what one node
// changes reaches another node's replica and its subscribers.
func TestEtcdMetastore_AnotherNodeFollowsThroughItsWatch(t *testing.T) {
	te := startEtcd(t)
	a, b := openMetastore(t, te, "a"), openMetastore(t, te, "b")
	heard := subscribe(b)
	rec, _, err := a.CreateTopic(bg, "orders", 2, runtime.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "b to see the create", func() bool {
		got, ok, _ := b.Topic(bg, "orders")
		return ok && got == rec
	})
	if err := a.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "b to see the delete", func() bool {
		_, ok, _ := b.Topic(bg, "orders")
		return !ok
	})
}

// TestEtcdMetastore_RetentionChangesFromTwoNodesAllLand: a change is a
// compare and swap on the record's revision, so changes made at once by
// two nodes all land, none over another.
func TestEtcdMetastore_RetentionChangesFromTwoNodesAllLand(t *testing.T) {
	te := startEtcd(t)
	a, b := openMetastore(t, te, "a"), openMetastore(t, te, "b")
	heard := subscribe(a)
	if _, _, err := a.CreateTopic(bg, "orders", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	const each = 20
	var wg sync.WaitGroup
	for _, m := range []*cluster.EtcdMetastore{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := m.UpdateRetention(bg, "orders", func(r runtime.Retention) (runtime.Retention, error) {
					r.Ms++
					return r, nil
				}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// a reads its own writes at once, b's once its watch brings them.
	heard.waitFor(t, fmt.Sprintf("retention %d after %d increments from two nodes", 2*each, 2*each), func() bool {
		got, _, _ := a.Topic(bg, "orders")
		return got.RetentionMs == 2*each
	})
	if got, _, _ := a.Topic(bg, "orders"); got.RetentionMs != 2*each {
		t.Fatalf("retention after %d increments from two nodes: %d", 2*each, got.RetentionMs)
	}
}

// TestEtcdMetastore_IncarnationGoneAsksEtcdNotTheReplica: a node whose
// replica is stale (it stopped following) still learns that an
// incarnation is gone: a deleted and recreated topic carries a new id.
func TestEtcdMetastore_IncarnationGoneAsksEtcdNotTheReplica(t *testing.T) {
	te := startEtcd(t)
	a, b := openMetastore(t, te, "a"), openMetastore(t, te, "b")
	heard := subscribe(b)
	old, _, err := a.CreateTopic(bg, "orders", 1, runtime.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "b to see the create", func() bool { _, ok, _ := b.Topic(bg, "orders"); return ok })
	b.Close() // b's replica stops here
	if gone, err := b.IncarnationGone(bg, "orders", old.Incarnation); err != nil || gone {
		t.Fatalf("the live incarnation: gone %v, %v", gone, err)
	}
	if err := a.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.CreateTopic(bg, "orders", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	if stale, _, _ := b.Topic(bg, "orders"); stale.Incarnation != old.Incarnation {
		t.Fatalf("b's stopped replica moved: %+v", stale)
	}
	if gone, err := b.IncarnationGone(bg, "orders", old.Incarnation); err != nil || !gone {
		t.Fatalf("the replaced incarnation: gone %v, %v; want gone", gone, err)
	}
}

// TestEtcdMetastore_AssignedReadsTheAssignment: a node owns exactly the
// partitions the assignment names it for, of topics that exist; deleting
// a topic deletes its assignment.
func TestEtcdMetastore_AssignedReadsTheAssignment(t *testing.T) {
	te := startEtcd(t)
	a, b := openMetastore(t, te, "a"), openMetastore(t, te, "b")
	heard := subscribe(b)
	if _, _, err := a.CreateTopic(bg, "orders", 2, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	cli := te.client()
	for p, node := range []string{"a", "b"} {
		if _, err := cli.Put(bg, "/narad/assign/orders/"+string(rune('0'+p)), node); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(bg, "/narad/assign/orders/7", "b"); err != nil { // past the topic's partitions
		t.Fatal(err)
	}
	heard.waitFor(t, "b to see its assignment", func() bool { ok, _ := b.Assigned(bg, "orders", 1); return ok })
	for _, c := range []struct {
		m    *cluster.EtcdMetastore
		p    int
		want bool
	}{{b, 0, false}, {b, 1, true}, {b, 7, false}, {b, -1, false}} {
		if got, err := c.m.Assigned(bg, "orders", c.p); err != nil || got != c.want {
			t.Fatalf("b assigned partition %d: %v, %v; want %v", c.p, got, err, c.want)
		}
	}
	if owner, ok := b.Owner("orders", 0); !ok || owner != "a" {
		t.Fatalf("owner of partition 0: %q, %v", owner, ok)
	}
	if err := a.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "b to see the delete", func() bool { _, ok := b.Owner("orders", 1); return !ok })
	if got, err := cli.Get(bg, "/narad/assign/", clientv3.WithPrefix()); err != nil || got.Count != 0 {
		t.Fatalf("assignments left after the topic's delete: %v, %v", got, err)
	}
}

// TestEtcdMetastore_CaughtUpFollowsEtcdThroughARestart: the replica is
// caught up while etcd answers; with etcd down it is not, and it still
// serves what it holds; after etcd comes back it catches up, changes
// made meanwhile included.
func TestEtcdMetastore_CaughtUpFollowsEtcdThroughARestart(t *testing.T) {
	te := startEtcd(t)
	m := openMetastore(t, te, "a")
	other := openMetastore(t, te, "b")
	heard := subscribe(m)
	rec, _, err := m.CreateTopic(bg, "orders", 1, runtime.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, m, true)

	te.stop()
	waitCaughtUp(t, m, false)
	if got, ok, _ := m.Topic(bg, "orders"); !ok || got != rec {
		t.Fatalf("with etcd down the replica serves %+v, %v; want %+v", got, ok, rec)
	}

	te.start()
	if _, _, err := other.CreateTopic(bg, "payments", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "the replica to see a change made after the restart", func() bool { _, ok, _ := m.Topic(bg, "payments"); return ok })
	waitCaughtUp(t, m, true)
}

// TestEtcdMetastore_CaughtUpWhileOnlyOtherKeysChange: etcd's revision
// moves with writes outside the prefix (another cluster on the same
// etcd), which no event of the watch carries: only the progress
// notifications the metastore asks for move the replica's revision, so
// CaughtUp holds only if they reach the watch (written by review).
func TestEtcdMetastore_CaughtUpWhileOnlyOtherKeysChange(t *testing.T) {
	te := startEtcd(t)
	m := openMetastore(t, te, "a")
	other := te.client()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := other.Put(bg, "/another-cluster/k", fmt.Sprint(i)); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()
	waitCaughtUp(t, m, true)
}
