package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

var bg = context.Background()

// TestDemo: the self-demonstration `go run .` runs passes, and leaves no
// goroutine behind (TestMain).
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := demo(bg, &out); err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	if !strings.HasSuffix(out.String(), "narad-broker-example: ok\n") {
		t.Fatalf("the demo said:\n%s", &out)
	}
}

// TestBrokers_JoinOneClusterThatEitherServes: two brokers in this process,
// each embedding a node and serving it on its own server, given one etcd,
// form one cluster: each lists the other at its broker's address, a
// topic's partitions are spread over both, a client of either reaches
// every partition (a node asked for the other's answers 421 and the
// client follows the owner), and each broker's own route, beside the API
// on the same server, lists what its node owns.
func TestBrokers_JoinOneClusterThatEitherServes(t *testing.T) {
	socket := startEtcd(t)
	brokers := map[string]*broker{}
	for _, id := range []string{"a", "b"} {
		b, err := startBroker(bg, options{listen: "127.0.0.1:0", dataDir: filepath.Join(t.TempDir(), id), etcd: "unix://" + socket, nodeID: id})
		if err != nil {
			t.Fatalf("broker %s: %v", id, err)
		}
		t.Cleanup(func() {
			if err := b.close(); err != nil {
				t.Errorf("close broker %s: %v", id, err)
			}
		})
		brokers[id] = b
	}
	a, b := newClient(t, brokers["a"]), newClient(t, brokers["b"])
	watch, heard := observe(t, socket)
	if _, _, err := a.CreateTopic(bg, "orders", 4, client.Retention{}); err != nil {
		t.Fatal(err)
	}

	// a's replica holds the topic (a node reads its own writes), written
	// after b registered: it lists b too.
	nodes, err := a.Nodes(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].ID != "a" || nodes[0].Addr != brokers["a"].url || nodes[1].ID != "b" || nodes[1].Addr != brokers["b"].url {
		t.Fatalf("a lists the nodes %+v; want a at %s and b at %s", nodes, brokers["a"].url, brokers["b"].url)
	}

	owner := make([]string, 4)
	waitFor(t, heard, "every partition to have an owner", func() bool {
		for p := range owner {
			owner[p], _ = watch.Owner("orders", p)
			if owner[p] == "" {
				return false
			}
		}
		return true
	})
	if !slices.Contains(owner, "a") || !slices.Contains(owner, "b") {
		t.Fatalf("the partitions' owners: %v; want both brokers", owner)
	}

	for p, o := range owner {
		value := fmt.Sprintf("orders/%d", p)
		if _, err := a.Produce(bg, "orders", p, []client.Record{{Value: []byte(value)}}); err != nil {
			t.Fatalf("produce into %d (%s's) through a: %v", p, o, err)
		}
		got, err := b.Fetch(bg, "orders", p, 0, client.FetchOptions{})
		if err != nil || len(got.Records) != 1 || string(got.Records[0].Value) != value {
			t.Fatalf("fetch %d (%s's) through b: %+v, %v; want %q", p, o, got, err, value)
		}
	}
	ofB := slices.Index(owner, "b")
	status, body := get(t, brokers["a"].url+fmt.Sprintf("/v1/topics/orders/partitions/%d/records?offset=0", ofB))
	if status != http.StatusMisdirectedRequest || !strings.Contains(body, brokers["b"].url) {
		t.Fatalf("a asked for partition %d, b's: %d %s; want 421 naming b at %s", ofB, status, body, brokers["b"].url)
	}

	for id, br := range brokers {
		got, err := ownPartitions(bg, br.url)
		if err != nil {
			t.Fatalf("broker %s's own route: %v", id, err)
		}
		var want []partitionStatus
		for p, o := range owner {
			if o == id {
				want = append(want, partitionStatus{Topic: "orders", Partition: p, HighWatermark: 1})
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("broker %s's own route lists %+v; want %+v", id, got, want)
		}
	}
}

func newClient(t *testing.T, b *broker) *client.Client {
	t.Helper()
	c, err := client.New(b.url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get sends a GET, following nothing.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// observe follows the cluster's records on the etcd at socket, as a node
// of its own would, and returns its metastore and a channel that wakes at
// each change it applies; the test closes both.
func observe(t *testing.T, socket string) (*cluster.EtcdMetastore, <-chan struct{}) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + socket}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	m, err := cluster.OpenEtcdMetastore(bg, cluster.Config{Client: cli, NodeID: "observer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	heard := make(chan struct{}, 1)
	m.Subscribe(func(string) {
		select {
		case heard <- struct{}{}:
		default:
		}
	})
	return m, heard
}

// waitFor waits until cond holds, checking again at each change heard;
// a wait that cannot end fails the test, never hangs it.
func waitFor(t *testing.T, heard <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for !cond() {
		select {
		case <-heard:
		case <-limit.C:
			t.Fatalf("waiting for %s", what)
		}
	}
}
