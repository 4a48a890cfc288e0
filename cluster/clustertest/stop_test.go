package clustertest

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/narad-io/storage/server"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestCluster_ANodeStoppedWhileEtcdIsDownCloses: with etcd down, Close
// stops every node, the one leading the assignment and the ones waiting
// in its election alike, without error (the daemon's exit 0) and with
// every log closed: no etcd call on the way out (a candidate's
// withdrawal, the leader's resignation, the lease's revoke) outlasts the
// stop's deadline, Config.ShutdownTimeout (found in a trial: a node not
// leading waited for etcd without end, in the election API's cleanup of
// its cancelled campaign).
func TestCluster_ANodeStoppedWhileEtcdIsDownCloses(t *testing.T) {
	te := startEtcd(t)
	var nodes []*node
	for _, id := range []string{"a", "b", "c"} { // a deadline shorter than the TTL: it, not the TTL, ends the stop
		nodes = append(nodes, startNode(t, te, id, filepath.Join(t.TempDir(), id), func(c *server.Config) { c.ShutdownTimeout = server.Duration(time.Second) }))
	}
	waitKeyCount(t, te, "/narad/assigner/", 3) // each node is a candidate: one leads, two wait
	te.stop()
	for _, d := range nodes {
		if !d.waitLog("cannot renew the cluster membership lease") {
			t.Fatalf("node %s never noticed etcd gone", d.id)
		}
	}
	for _, d := range nodes {
		d.stop() // Close returns nil, or the test fails
		if !d.waitLog("stopped: every log closed") {
			t.Fatalf("node %s stopped without closing every log", d.id)
		}
	}
}

// waitKeyCount waits, on a watch, until n keys are under prefix.
func waitKeyCount(t *testing.T, te *testEtcd, prefix string, n int64) {
	t.Helper()
	cli := te.client()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	for {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatalf("waiting for %d keys under %s: %v", n, prefix, err)
		}
		if resp.Count >= n {
			return
		}
		wr := <-cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		if err := wr.Err(); err != nil || ctx.Err() != nil {
			t.Fatalf("waiting for %d keys under %s: %v, %v", n, prefix, err, ctx.Err())
		}
	}
}

// TestCluster_ACloseThatEndsAStartLeavesTheClusterAndTheDirectory: a
// cluster's node closed while its Start runs (or once it returned) ends
// that Start (nil, or ErrClosed) and stops all it started: Close returns
// nil, nothing is left running (goleak: a registration not left keeps
// its lease's goroutines), and the same directory and node id open and
// start again at once (the directory's lock was released).
func TestCluster_ACloseThatEndsAStartLeavesTheClusterAndTheDirectory(t *testing.T) {
	te := startEtcd(t)
	cfg := nodeConfig(te.socket, "a", filepath.Join(t.TempDir(), "a"))
	for round := range 4 {
		s, err := server.New(bg, cfg)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		started := make(chan error, 1)
		go func() { started <- s.Start(bg) }()
		var startErr error
		ready := round%2 == 1 // else Close comes while Start runs
		if ready {
			startErr = <-started
		}
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		if !ready {
			startErr = <-started
		}
		if startErr != nil && !errors.Is(startErr, server.ErrClosed) {
			t.Fatalf("round %d: start: %v, want nil or ErrClosed", round, startErr)
		}
	}
}
