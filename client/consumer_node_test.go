package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/server"
)

// node is a node on a temporary directory, served on loopback, for the
// tests and examples that need a real one.
type node struct {
	s    *server.Server
	dir  string
	http *http.Client
	Addr string
}

// startNode starts a node; stop ends it and its client's connections.
func startNode() (*node, error) {
	dir, err := os.MkdirTemp("", "narad-client")
	if err != nil {
		return nil, err
	}
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Listen = dir, "127.0.0.1:0"
	ctx := context.Background()
	s, err := server.New(ctx, cfg)
	if err == nil {
		err = s.Start(ctx)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &node{s: s, dir: dir, http: &http.Client{Transport: &http.Transport{}}, Addr: "http://" + s.Addr().String()}, nil
}

func (n *node) client() *client.Client {
	c, err := client.New(n.Addr, client.Options{HTTPClient: n.http})
	if err != nil {
		panic(err)
	}
	return c
}

func (n *node) stop() {
	n.http.CloseIdleConnections()
	n.s.Close()
	os.RemoveAll(n.dir)
}

func testNode(t *testing.T) *node {
	t.Helper()
	n, err := startNode()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.stop)
	return n
}

// readAll polls k until io.EOF: each partition's values in Poll's order.
func readAll(t *testing.T, k *client.Consumer) map[int][]string {
	t.Helper()
	got := map[int][]string{}
	for {
		b, err := k.Poll(context.Background())
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range b.Records {
			if r.Offset != int64(len(got[b.Partition])) {
				t.Fatalf("partition %d: offset %d after %d records", b.Partition, r.Offset, len(got[b.Partition]))
			}
			got[b.Partition] = append(got[b.Partition], string(r.Value))
		}
	}
}

func numbered(p, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%d/%d", p, i))
	}
	return out
}

// TestConsumerE2E_ReadsAndFollowsATopic: on a node, a consumer reads
// every partition of a topic, each in order, from the earliest; one that
// follows gets what commits later, on any partition.
func TestConsumerE2E_ReadsAndFollowsATopic(t *testing.T) {
	n := testNode(t)
	ctx := context.Background()
	c := n.client()
	e2etest.ProduceNumbered(t, ctx, c, "orders", 4, 30)
	k, err := c.NewConsumer(ctx, "orders", client.ConsumerOptions{MaxRecords: 7})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, k)
	k.Close()
	for p := range 4 {
		if !slices.Equal(got[p], numbered(p, 30)) {
			t.Fatalf("partition %d: %v", p, got[p])
		}
	}

	k, err = c.NewConsumer(ctx, "orders", client.ConsumerOptions{Start: client.StartLatest(), Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for _, p := range []int{2, 0} {
		if _, err := c.Produce(ctx, "orders", p, []client.Record{{Value: []byte("late")}}); err != nil {
			t.Fatal(err)
		}
		b, err := k.Poll(ctx)
		if err != nil || b.Partition != p || len(b.Records) != 1 || b.Records[0].Offset != 30 || string(b.Records[0].Value) != "late" {
			t.Fatalf("following, a record to partition %d: %+v, %v", p, b, err)
		}
	}
}

// TestConsumerE2E_IdlePartitionsShareAWait: on a node, a consumer that
// follows 40 partitions with 4 requests in flight reads each once, then
// waits on all 40 with one topic-wide wait; a record produced to
// partition 37, then one to partition 2, is each read with one fetch
// (the wait answers it ready), no turns over the partitions.
func TestConsumerE2E_IdlePartitionsShareAWait(t *testing.T) {
	n := testNode(t)
	ctx := context.Background()
	c := n.client()
	const partitions = 40
	if _, _, err := c.CreateTopic(ctx, "orders", partitions, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	watch := e2etest.WatchRequests(n.http.Transport)
	kc, err := client.New(n.Addr, client.Options{HTTPClient: &http.Client{Transport: watch}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kc.NewConsumer(ctx, "orders", client.ConsumerOptions{Start: client.StartLatest(), Follow: true, MaxInFlight: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	polled := make(chan error, 1)
	var b client.Batch
	poll := func() {
		pctx, cancel := context.WithTimeout(ctx, time.Minute) // a record never read fails the test, never hangs it
		defer cancel()
		var err error
		b, err = k.Poll(pctx)
		polled <- err
	}
	go poll()
	if w := watch.NextWait(t); len(w.Partitions) != partitions || watch.Fetches() != partitions {
		t.Fatalf("idle: the first wait names %d partitions after %d fetches; want every partition read once, then waited on", len(w.Partitions), watch.Fetches())
	}
	for i, p := range []int{37, 2} {
		if _, err := c.Produce(ctx, "orders", p, []client.Record{{Value: []byte("late")}}); err != nil {
			t.Fatal(err)
		}
		if err := <-polled; err != nil || b.Partition != p || len(b.Records) != 1 || string(b.Records[0].Value) != "late" {
			t.Fatalf("a record to idle partition %d: %+v, %v", p, b, err)
		}
		if got := watch.Fetches(); got != partitions+i+1 {
			t.Fatalf("a record to idle partition %d read after %d fetches; want %d: the first reads, then one for each record", p, got, partitions+i+1)
		}
		if i == 0 {
			go poll()
		}
	}
}

// TestConsumerE2E_CursorResumes: a consumer through a cursor commits
// what it read; the next one, through the same cursor, reads only the
// rest, on every partition.
func TestConsumerE2E_CursorResumes(t *testing.T) {
	n := testNode(t)
	ctx := context.Background()
	c := n.client()
	e2etest.ProduceNumbered(t, ctx, c, "orders", 3, 5)
	k, err := c.NewConsumer(ctx, "orders", client.ConsumerOptions{Cursor: "audit", MaxRecords: 2})
	if err != nil {
		t.Fatal(err)
	}
	read := map[int]int{}
	for range 3 {
		b, err := k.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read[b.Partition] += len(b.Records)
	}
	if err := k.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	k.Close()
	cur, err := c.Cursor(ctx, "orders", "audit")
	if err != nil {
		t.Fatal(err)
	}
	for _, pos := range cur.Partitions {
		if pos.Position != int64(read[pos.Partition]) {
			t.Fatalf("the cursor stands at %+v; the consumer committed %v records a partition", cur.Partitions, read)
		}
	}

	k, err = c.NewConsumer(ctx, "orders", client.ConsumerOptions{Cursor: "audit"})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	got := map[int][]string{}
	for {
		b, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range b.Records {
			got[b.Partition] = append(got[b.Partition], string(r.Value))
		}
	}
	for p := range 3 {
		if want := numbered(p, 5)[read[p]:]; !slices.Equal(got[p], want) {
			t.Fatalf("resumed, partition %d: %v, want %v", p, got[p], want)
		}
	}
}

// BenchmarkConsumer reads a topic of 16 partitions of 10,000 records of
// 100 bytes on a node in this process, whole, through a Consumer, beside
// the same records read by Fetch, one partition after another, in the
// same run (the ratio of the two is the figure; the node is the same).
func BenchmarkConsumer(b *testing.B) {
	n, err := startNode()
	if err != nil {
		b.Fatal(err)
	}
	defer n.stop()
	ctx := context.Background()
	c := n.client()
	const partitions, perPartition, size = 16, 10000, 100
	if _, _, err := c.CreateTopic(ctx, "bench", partitions, client.Retention{}); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, size)
	for p := range partitions {
		batch := make([]client.Record, perPartition)
		for i := range batch {
			batch[i] = client.Record{Value: value}
		}
		if _, err := c.Produce(ctx, "bench", p, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.Run(fmt.Sprintf("consumer/partitions=%d/records=%d/size=%d", partitions, partitions*perPartition, size), func(b *testing.B) {
		b.SetBytes(partitions * perPartition * size)
		b.ReportAllocs()
		for b.Loop() {
			k, err := c.NewConsumer(ctx, "bench", client.ConsumerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			read := 0
			for {
				batch, err := k.Poll(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				read += len(batch.Records)
			}
			k.Close()
			if read != partitions*perPartition {
				b.Fatalf("read %d records", read)
			}
		}
	})
	b.Run(fmt.Sprintf("fetch-each-partition/partitions=%d/records=%d/size=%d", partitions, partitions*perPartition, size), func(b *testing.B) {
		b.SetBytes(partitions * perPartition * size)
		b.ReportAllocs()
		for b.Loop() {
			read := 0
			for p := range partitions {
				for offset := int64(0); offset < perPartition; {
					f, err := c.Fetch(ctx, "bench", p, offset, client.FetchOptions{})
					if err != nil {
						b.Fatal(err)
					}
					read += len(f.Records)
					offset = f.NextOffset
				}
			}
			if read != partitions*perPartition {
				b.Fatalf("read %d records", read)
			}
		}
	})
}
