package clustertest

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

var bg = context.Background()

// testEtcd is one embedded etcd server, its data in dir, serving clients
// on a Unix socket there (no port to race for), stoppable and restartable
// on the same socket and data.
type testEtcd struct {
	t      testing.TB
	dir    string
	socket string
	e      *embed.Etcd
}

// startEtcd starts a single-member etcd in a fresh temporary directory;
// the test stops it when it ends.
func startEtcd(t testing.TB) *testEtcd {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir) // for the peer socket (start)
	te := &testEtcd{t: t, dir: dir, socket: filepath.Join(dir, "client.sock")}
	te.start()
	t.Cleanup(te.stop)
	return te
}

func (te *testEtcd) start() {
	te.t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(te.dir, "data")
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop()) // its shutdown logs errors by design
	client := url.URL{Scheme: "unix", Path: te.socket}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	// etcd takes a peer socket's name from the URL's host, a name in the
	// working directory, which startEtcd made the test's directory.
	peer := url.URL{Scheme: "unix", Host: "localhost:2380"}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.ListenMetricsUrls = nil
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		te.t.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		te.t.Fatalf("etcd failed to start: %v", err)
	}
	te.e = e
}

// stop stops the server, as a crash of etcd would look to its clients.
func (te *testEtcd) stop() {
	if te.e != nil {
		te.e.Close()
		te.e = nil
	}
}

// client returns a client of the server; the test closes it when it ends.
func (te *testEtcd) client() *clientv3.Client {
	te.t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"unix://" + te.socket},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		te.t.Fatalf("etcd client: %v", err)
	}
	te.t.Cleanup(func() { cli.Close() })
	return cli
}
