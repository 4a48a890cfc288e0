package clustertest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/narad-io/storage/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// node is one server.Server of a test cluster in this process, as a
// broker embeds it: serving on its own loopback listener, over its own
// data directory, logging at debug into its endpoint's log as the daemon
// does to stderr (JSON lines), so a test waits on the same lines. goleak
// (TestMain) sees every goroutine it leaves.
type node struct {
	endpoint
	cfg    server.Config
	server *server.Server // nil while stopped
}

// nodeConfig is what node id of the cluster on the etcd at socket runs
// with over dataDir: the daemon's defaults, a loopback port of its own
// choosing, a lease of 2 s (a node that stops is seen gone soon).
func nodeConfig(socket, id, dataDir string) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = dataDir
	cfg.Listen = "127.0.0.1:0"
	cfg.Metastore = "etcd+unix://" + socket
	cfg.NodeID = id
	cfg.MemberTTL = server.Duration(2 * time.Second)
	cfg.DiskCheckBudget = 0 // tested in package server; every start here would pay it
	return cfg
}

// startNode starts node id on te's etcd over dataDir, its configuration
// changed by each of with, and returns once it is ready; the test closes
// it if it still runs at the end.
func startNode(t testing.TB, te *testEtcd, id, dataDir string, with ...func(*server.Config)) *node {
	t.Helper()
	return startNodeWith(t, id, configured(nodeConfig(te.socket, id, dataDir), with))
}

// startNodeThrough is startNode reaching etcd through px.
func startNodeThrough(t testing.TB, px *proxy, id, dataDir string, with ...func(*server.Config)) *node {
	t.Helper()
	return startNodeWith(t, id, configured(nodeConfig(px.path, id, dataDir), with))
}

func configured(cfg server.Config, with []func(*server.Config)) server.Config {
	for _, change := range with {
		change(&cfg)
	}
	return cfg
}

// startNodeWith starts a node of cfg, named id in the test's messages.
func startNodeWith(t testing.TB, id string, cfg server.Config) *node {
	t.Helper()
	n := &node{endpoint: endpoint{t: t, id: id, dataDir: cfg.DataDir}, cfg: cfg}
	n.start()
	t.Cleanup(n.close)
	return n
}

// startNodes starts one node per id on te's etcd, each over a fresh data
// directory.
func startNodes(t *testing.T, te *testEtcd, ids ...string) []*node {
	t.Helper()
	out := make([]*node, len(ids))
	for i, id := range ids {
		out[i] = startNode(t, te, id, filepath.Join(t.TempDir(), id))
	}
	return out
}

// start makes and starts the server (again, over the same directory),
// and returns once it is ready: Start returned.
func (n *node) start() {
	n.t.Helper()
	n.restart()
	cfg := n.cfg
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.Logger = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(&n.nodeLog), zapcore.DebugLevel))
	ctx, cancel := context.WithTimeout(bg, logWaitLimit) // a start that cannot end fails the test
	defer cancel()
	s, err := server.New(ctx, cfg)
	if err != nil {
		n.end()
		n.t.Fatalf("node %s: %v\n%s", n.id, err, n.log())
	}
	if err := s.Start(ctx); err != nil {
		s.Close()
		n.end()
		n.t.Fatalf("node %s did not start: %v\n%s", n.id, err, n.log())
	}
	n.server = s
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	n.addr = scheme + "://" + s.Addr().String()
}

// stop closes the server (it leaves the cluster, closes every log) and
// fails the test if Close failed, or did not return within logWaitLimit
// (a stop that cannot end fails the test, never hangs it).
func (n *node) stop() {
	n.t.Helper()
	s := n.server
	n.server = nil
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	limit := time.NewTimer(logWaitLimit)
	defer limit.Stop()
	select {
	case err := <-closed:
		n.end()
		if err != nil {
			n.t.Fatalf("node %s: %v\n%s", n.id, err, n.log())
		}
	case <-limit.C:
		n.t.Fatalf("node %s's Close did not return within %v:\n%s", n.id, logWaitLimit, n.log())
	}
}

// close closes the server if it still runs, at the test's end.
func (n *node) close() {
	if n.server != nil {
		if err := n.server.Close(); err != nil {
			n.t.Errorf("node %s: %v", n.id, err)
		}
		n.server = nil
		n.end()
	}
	if n.t.Failed() {
		n.t.Logf("node %s's log:\n%s", n.id, n.log())
	}
}
