package main

import (
	"github.com/narad-io/storage/server"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfig_ClusterFlags: --metastore takes local, etcd endpoints or a
// local etcd's socket; a node id and an advertised address come only
// with etcd, and a config file gives them as the flags do.
func TestConfig_ClusterFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // endpoints; nil: local
		err  string
	}{
		{args: nil},
		{args: []string{"--metastore", "local"}},
		{args: []string{"--metastore", "etcd://10.0.0.1:2379,etcd-2:2379"}, want: []string{"http://10.0.0.1:2379", "http://etcd-2:2379"}},
		{args: []string{"--metastore", "etcd+unix:///run/etcd.sock", "--node-id", "node-a"}, want: []string{"unix:///run/etcd.sock"}},
		{args: []string{"--metastore", "etcd://10.0.0.1"}, err: "not host:port"},
		{args: []string{"--metastore", "etcd://"}, err: "not host:port"},
		{args: []string{"--metastore", "etcd+unix://run/etcd.sock"}, err: "absolute"},
		{args: []string{"--metastore", "zookeeper://z:2181"}, err: "want local"},
		{args: []string{"--node-id", "a"}, err: "--metastore etcd"},
		{args: []string{"--advertise-addr", "h:1"}, err: "--metastore etcd"},
		{args: []string{"--metastore", "etcd://e:2379", "--node-id", "a/b"}, err: "node id"},
		{args: []string{"--metastore", "etcd://e:2379", "--member-ttl", "500ms"}, err: "member-ttl"},
		{args: []string{"--metastore", "etcd://e:2379", "--fence-after", "500ms"}, err: "fence-after"},
	} {
		cfg, err := parseServeFlags(tc.args, io.Discard)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("%v: %v, want an error saying %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		got, _ := cfg.EtcdEndpoints()
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Fatalf("%v: endpoints %v, want %v", tc.args, got, tc.want)
		}
	}
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte(`{"metastore": "etcd://e:2379", "node_id": "node-b", "advertise_addr": "h:7480", "member_ttl": "3s", "fence_after": "2m"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseServeFlags([]string{"--config", file, "--node-id", "node-c"}, io.Discard)
	if err != nil || cfg.Metastore != "etcd://e:2379" || cfg.NodeID != "node-c" || cfg.AdvertiseAddr != "h:7480" || cfg.MemberTTL != server.Duration(3e9) || cfg.FenceAfter != server.Duration(2*time.Minute) {
		t.Fatalf("config file with a flag over it: %+v, %v", cfg, err)
	}
}

// TestConfig_InflightBudgetHoldsTheLargestBody: a budget under the body
// cap could never take the largest body, and is refused at start; so is a
// shutdown timeout that would give a graceful stop no time (found by
// review).
func TestConfig_InflightBudgetHoldsTheLargestBody(t *testing.T) {
	if _, err := parseServeFlags([]string{"--max-body-bytes", "1000", "--max-inflight-bytes", "999"}, io.Discard); err == nil || !strings.Contains(err.Error(), "max-inflight-bytes") {
		t.Fatalf("a budget under the body cap: %v", err)
	}
	if _, err := parseServeFlags([]string{"--shutdown-timeout", "0s"}, io.Discard); err == nil || !strings.Contains(err.Error(), "shutdown-timeout") {
		t.Fatalf("a shutdown timeout of 0: %v", err)
	}
	for _, ok := range [][]string{{"--max-body-bytes", "1000", "--max-inflight-bytes", "1000"}, {"--max-inflight-bytes", "0"}} {
		if _, err := parseServeFlags(ok, io.Discard); err != nil {
			t.Fatalf("%v: %v", ok, err)
		}
	}
}

// TestConfig_ListenIsRequired: the daemon serves its API itself, so an
// empty --listen (or "listen": "" in a config file) is refused as any
// address without a port is, not taken as server.Config's "" (the
// embedding program's own server), which would start a node no one can
// reach.
func TestConfig_ListenIsRequired(t *testing.T) {
	if _, err := parseServeFlags([]string{"--listen", ""}, io.Discard); err == nil || !strings.Contains(err.Error(), `listen ""`) {
		t.Fatalf("--listen \"\": %v, want the listen error", err)
	}
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte(`{"listen": ""}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseServeFlags([]string{"--config", file}, io.Discard); err == nil || !strings.Contains(err.Error(), `listen ""`) {
		t.Fatalf(`"listen": "" in a config file: %v, want the listen error`, err)
	}
}
