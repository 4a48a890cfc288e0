package clustertest

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/narad-io/storage/client"
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
// cursor is made on, and committed to, every owner: a consumer of the
// same cursor through another node reads only what came after.
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
			t.Fatalf("the cursor on %s: %v", d.id, err)
		}
		for _, pos := range cur.Partitions {
			if owner[pos.Partition] != d.id || pos.Position != 4 || pos.Lag != 0 {
				t.Fatalf("the cursor on %s: %+v; want its own partitions at 4", d.id, cur.Partitions)
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
