package main

import (
	"io"
	"net"
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
		got, _ := etcdEndpoints(cfg.Metastore)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Fatalf("%v: endpoints %v, want %v", tc.args, got, tc.want)
		}
	}
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte(`{"metastore": "etcd://e:2379", "node_id": "node-b", "advertise_addr": "h:7480", "member_ttl": "3s", "fence_after": "2m"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseServeFlags([]string{"--config", file, "--node-id", "node-c"}, io.Discard)
	if err != nil || cfg.Metastore != "etcd://e:2379" || cfg.NodeID != "node-c" || cfg.AdvertiseAddr != "h:7480" || cfg.MemberTTL != duration(3e9) || cfg.FenceAfter != duration(2*time.Minute) {
		t.Fatalf("config file with a flag over it: %+v, %v", cfg, err)
	}
}

// TestAdvertised_NamesOneHostAndTheSchemeServed: the advertised address
// is the flag's (host:port given the scheme served) or the listening
// address, never a wildcard, and never another scheme than the one
// served.
func TestAdvertised_NamesOneHostAndTheSchemeServed(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7480}
	wildcard := &net.TCPAddr{IP: net.IPv4zero, Port: 7480}
	for _, tc := range []struct {
		flag, scheme string
		listening    net.Addr
		want, err    string
	}{
		{"", "http", loop, "http://127.0.0.1:7480", ""},
		{"", "https", loop, "https://127.0.0.1:7480", ""},
		{"", "http", wildcard, "", "advertise-addr"},
		{"node-a.internal:7480", "http", wildcard, "http://node-a.internal:7480", ""},
		{"https://node-a.internal:7480/", "https", wildcard, "https://node-a.internal:7480", ""},
		{"http://node-a.internal:7480", "https", wildcard, "", "serves https"},
		{"http://node-a.internal:7480/x", "http", wildcard, "", "want host:port"},
	} {
		got, err := advertised(tc.flag, tc.scheme, tc.listening)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("%q over %s on %v: %q, %v; want an error saying %q", tc.flag, tc.scheme, tc.listening, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Fatalf("%q over %s on %v: %q, %v; want %q", tc.flag, tc.scheme, tc.listening, got, err, tc.want)
		}
	}
}
