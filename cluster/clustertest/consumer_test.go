package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
)

// consumeAll polls k until io.EOF and returns each partition's values in
// the order Poll gave them.
func consumeAll(t *testing.T, k *client.Consumer) map[int][]string {
	t.Helper()
	got := map[int][]string{}
	for {
		b, err := k.Poll(bg)
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range b.Records {
			got[b.Partition] = append(got[b.Partition], string(r.Value))
		}
	}
}

// TestCluster_ATopicConsumerCoversEveryOwner: a client.Consumer made
// through one node of three reads every partition of a topic spread over
// the three (its fetches follow the 421 answers to each owner), and its
// cursor is made on, and committed to, every owner: the cursor described
// through any node has every partition's position, and a consumer of the
// same cursor through another node reads only what came after. A cursor
// made through one node is made on every owner; deleted through another,
// it is gone from all.
func TestCluster_ATopicConsumerCoversEveryOwner(t *testing.T) {
	te := startEtcd(t)
	nodes := startNodes(t, te, "a", "b", "c")
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	const partitions = 6
	if _, _, err := nodes[0].client().CreateTopic(bg, "orders", partitions, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owner := owners(t, watch, heard, "orders", partitions)
	spread := map[string]bool{}
	for _, o := range owner {
		spread[o] = true
	}
	if len(spread) != 3 {
		t.Fatalf("6 partitions over a, b and c: %v", owner)
	}
	produceEach(t, nodes, "orders", partitions, 0, 4)
	want := func(p, from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("orders/%d/%d", p, i))
		}
		return out
	}

	k, err := nodes[0].client().NewConsumer(bg, "orders", client.ConsumerOptions{Cursor: "audit"})
	if err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, k)
	if err := k.Commit(bg); err != nil {
		t.Fatal(err)
	}
	k.Close()
	for p := range partitions {
		if !slices.Equal(got[p], want(p, 0, 4)) {
			t.Fatalf("partition %d (%s's) read through a: %v", p, owner[p], got[p])
		}
	}
	for _, d := range nodes {
		cur, err := d.client().Cursor(bg, "orders", "audit")
		if err != nil {
			t.Fatalf("the cursor through %s: %v", d.id, err)
		}
		if len(cur.Partitions) != partitions {
			t.Fatalf("the cursor through %s: %+v; want all %d partitions", d.id, cur.Partitions, partitions)
		}
		for i, pos := range cur.Partitions {
			if pos.Partition != i || pos.Position != 4 || pos.Lag != 0 {
				t.Fatalf("the cursor through %s: %+v; want every partition at 4, in order", d.id, cur.Partitions)
			}
		}
	}

	produceEach(t, nodes, "orders", partitions, 4, 2)
	k, err = nodes[1].client().NewConsumer(bg, "orders", client.ConsumerOptions{Cursor: "audit"})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	got = consumeAll(t, k)
	for p := range partitions {
		if !slices.Equal(got[p], want(p, 4, 6)) {
			t.Fatalf("partition %d (%s's) resumed through b: %v", p, owner[p], got[p])
		}
	}

	cur, created, err := nodes[1].client().CreateCursor(bg, "orders", "late", client.Latest)
	if err != nil || !created || len(cur.Partitions) != partitions {
		t.Fatalf("a cursor made through b: created %v, %+v, %v; want all %d partitions", created, cur.Partitions, err, partitions)
	}
	for _, d := range nodes {
		own, err := d.client().Cursor(bg, "orders", "late")
		if err != nil || len(own.Partitions) != partitions || own.Partitions[0].Position != 6 {
			t.Fatalf("the cursor made through b, described through %s: %+v, %v", d.id, own.Partitions, err)
		}
	}
	if err := nodes[2].client().DeleteCursor(bg, "orders", "late"); err != nil {
		t.Fatal(err)
	}
	for _, d := range nodes {
		if _, err := d.client().Cursor(bg, "orders", "late"); !errors.Is(err, client.ErrCursorNotFound) {
			t.Fatalf("the cursor deleted through c, described through %s: %v", d.id, err)
		}
	}
	if err := nodes[0].client().DeleteCursor(bg, "orders", "late"); !errors.Is(err, client.ErrCursorNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
}

// TestCluster_ATopicConsumerReadsOnWhileAPartitionMoves: a consumer made
// through a partition's owner reads a first batch of it and commits, the
// partition moves to another node, and the consumer reads on: every
// record of both partitions (those produced after the move too) once, in
// order, and its Commit lands on the new owner, which the cursor moved
// to with the partition.
func TestCluster_ATopicConsumerReadsOnWhileAPartitionMoves(t *testing.T) {
	te := startEtcd(t)
	nodes := startNodes(t, te, "a", "b", "c")
	byID := map[string]*node{}
	for _, d := range nodes {
		byID[d.id] = d
	}
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	const partitions = 2
	if _, _, err := nodes[0].client().CreateTopic(bg, "orders", partitions, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owner := owners(t, watch, heard, "orders", partitions)
	from, to := owner[0], ""
	for _, d := range nodes {
		if d.id != from && (to == "" || d.id != owner[1]) {
			to = d.id
		}
	}
	produceEach(t, nodes, "orders", partitions, 0, 10)

	k, err := byID[from].client().NewConsumer(bg, "orders", client.ConsumerOptions{Cursor: "audit", MaxRecords: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	got := map[int][]string{}
	poll := func() error {
		t.Helper()
		b, err := k.Poll(bg)
		if err != nil {
			return err
		}
		for _, r := range b.Records {
			if want := int64(len(got[b.Partition])); r.Offset != want {
				t.Fatalf("partition %d: offset %d after %d records: a repeat or a gap", b.Partition, r.Offset, want)
			}
			got[b.Partition] = append(got[b.Partition], string(r.Value))
		}
		return nil
	}
	for len(got[0]) == 0 {
		if err := poll(); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Commit(bg); err != nil {
		t.Fatal(err)
	}
	read := len(got[0])

	if _, err := nodes[0].client().MovePartition(bg, "orders", 0, to); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "the move to complete", func() bool {
		o, _ := watch.Owner("orders", 0)
		return o == to && len(watch.Moves()) == 0
	})
	produceEach(t, nodes, "orders", partitions, 10, 5)

	for {
		err := poll()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after partition 0 moved %s -> %s: %v", from, to, err)
		}
	}
	for p := range partitions {
		var want []string
		for i := range 15 {
			want = append(want, fmt.Sprintf("orders/%d/%d", p, i))
		}
		if !slices.Equal(got[p], want) {
			t.Fatalf("partition %d, %d records read before partition 0 moved %s -> %s: %v", p, read, from, to, got[p])
		}
	}
	if err := k.Commit(bg); err != nil {
		t.Fatalf("commit after partition 0 moved %s -> %s: %v", from, to, err)
	}
	cur, err := byID[to].client().Cursor(bg, "orders", "audit")
	if err != nil {
		t.Fatal(err)
	}
	if len(cur.Partitions) == 0 || cur.Partitions[0].Partition != 0 || cur.Partitions[0].Position != 15 || cur.Partitions[0].Lag != 0 {
		t.Fatalf("the cursor on the new owner %s: %+v; want partition 0 at 15", to, cur.Partitions)
	}
}

// TestCluster_ATopicConsumerWaitsOnEachOwner: a consumer that follows a
// topic of 8 partitions over two nodes, with 4 requests in flight, reads
// each partition once (from its owner, learned from the 421s), then waits
// on the idle partitions with one topic-wide wait per owner, each naming
// that owner's partitions; a record produced to a partition of each
// owner is read, with one fetch each.
func TestCluster_ATopicConsumerWaitsOnEachOwner(t *testing.T) {
	te := startEtcd(t)
	nodes := startNodes(t, te, "a", "b")
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	const partitions = 8
	if _, _, err := nodes[0].client().CreateTopic(bg, "orders", partitions, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owner := owners(t, watch, heard, "orders", partitions)
	hostOf := map[string]string{}
	for _, d := range nodes {
		hostOf[d.id] = strings.TrimPrefix(d.addr, "http://")
	}
	want := map[string][]int{} // host -> the partitions it owns
	for p, o := range owner {
		want[hostOf[o]] = append(want[hostOf[o]], p)
	}
	if len(want) != 2 {
		t.Fatalf("8 partitions over a and b: %v", owner)
	}

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	requests := e2etest.WatchRequests(tr)
	c, err := client.New(nodes[0].addr, client.Options{HTTPClient: &http.Client{Transport: requests}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.NewConsumer(bg, "orders", client.ConsumerOptions{Start: client.StartLatest(), Follow: true, MaxInFlight: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	polled := make(chan error, 1)
	var b client.Batch
	poll := func() {
		ctx, cancel := context.WithTimeout(bg, time.Minute) // a record never read fails the test, never hangs it
		defer cancel()
		var err error
		b, err = k.Poll(ctx)
		polled <- err
	}
	go poll()
	waited := map[string][]int{}
	for len(waited) < 2 {
		w := requests.NextWait(t)
		if _, twice := waited[w.Host]; twice {
			t.Fatalf("a second wait at %s (%v) before the first at the other owner: waited %v", w.Host, w.Partitions, waited)
		}
		waited[w.Host] = w.Partitions
	}
	for host, ps := range want {
		if !slices.Equal(waited[host], ps) {
			t.Fatalf("idle: the waits named %v; want each owner's own partitions, %v", waited, want)
		}
	}
	// Each partition read once, straight from its owner (learned from
	// the 421s when NewConsumer took each partition's latest offset).
	reads := partitions
	if got := requests.Fetches(); got != reads {
		t.Fatalf("idle: %d fetches; want %d", got, reads)
	}
	for i, id := range []string{"b", "a"} {
		p := want[hostOf[id]][0]
		if _, err := nodes[0].client().Produce(bg, "orders", p, []client.Record{{Value: []byte("late")}}); err != nil {
			t.Fatal(err)
		}
		if err := <-polled; err != nil || b.Partition != p || len(b.Records) != 1 || string(b.Records[0].Value) != "late" {
			t.Fatalf("a record to partition %d, %s's: %+v, %v", p, id, b, err)
		}
		if got := requests.Fetches(); got != reads+i+1 {
			t.Fatalf("a record to partition %d, %s's, read after %d fetches; want %d: one for each record", p, id, got, reads+i+1)
		}
		if i == 0 {
			go poll()
		}
	}
}
