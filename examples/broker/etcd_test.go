package main

import (
	"net/url"
	"path/filepath"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startEtcd starts a single-member embedded etcd in a fresh temporary
// directory, serving clients on a Unix socket there (no port to race
// for), as cluster/clustertest does, and returns the socket's path; the
// test stops the server when it ends.
func startEtcd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir) // etcd takes a peer socket's name from its URL's host, a name in the working directory
	socket := filepath.Join(dir, "client.sock")
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "data")
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop()) // its shutdown logs errors by design
	client := url.URL{Scheme: "unix", Path: socket}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	peer := url.URL{Scheme: "unix", Host: "localhost:2380"}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.ListenMetricsUrls = nil
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd failed to start: %v", err)
	}
	return socket
}
