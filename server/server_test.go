package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// TestServer_HandlerOnAnotherMux: a program mounts the API on its own mux
// beside its own routes and serves it with its own server; produce and
// fetch go through, long polls end when that server shuts down (its
// RegisterOnShutdown ends them), and Close closes every log.
func TestServer_HandlerOnAnotherMux(t *testing.T) {
	ctx := context.Background()
	s := newServer(t, "")
	if s.Addr() != nil {
		t.Fatalf("no listen address, yet an address %v", s.Addr())
	}
	defer http.DefaultClient.CloseIdleConnections()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /broker/hello", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("hello")) })
	mux.Handle("/v1/", s.Handler())
	mux.Handle("/readyz", s.Handler())
	own := httptest.NewUnstartedServer(mux)
	own.Config.RegisterOnShutdown(s.EndLongPolls)
	own.Start()
	if code := statusOf(t, own.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz before Start: %d, want 503", code)
	}
	if s.Ready() {
		t.Fatal("ready before Start")
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !s.Ready() {
		t.Fatal("not ready after Start")
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	c, err := client.New(own.URL, client.Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateTopic(ctx, "orders", 1, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "orders", 0, []client.Record{{Value: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	f, err := c.Fetch(ctx, "orders", 0, 0, client.FetchOptions{})
	if err != nil || len(f.Records) != 1 || string(f.Records[0].Value) != "a" {
		t.Fatalf("fetch: %+v %v", f, err)
	}
	if code := statusOf(t, own.URL+"/broker/hello"); code != http.StatusOK {
		t.Fatalf("the program's own route: %d", code)
	}
	// The program's server ends the long polls as its shutdown begins.
	if err := own.Config.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	own.Close()
	select {
	case <-s.closing:
	default:
		t.Fatal("the program's server shut down, and long polls still wait")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if _, err := s.Node().Produce(ctx, "orders", 0, []partition.Record{{Value: []byte("b")}}); !errors.Is(err, runtime.ErrNodeClosed) {
		t.Fatalf("the node after Close: %v, want ErrNodeClosed", err)
	}
}

// TestServer_OwnListener: with a listen address the server serves the API
// itself from Start on, and a second server on the same data directory is
// refused with the lock's error.
func TestServer_OwnListener(t *testing.T) {
	cfg := testConfig(t, "127.0.0.1:0")
	ctx := context.Background()
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer http.DefaultClient.CloseIdleConnections()
	if _, err := New(ctx, cfg); !errors.Is(err, datadir.ErrLocked) {
		t.Fatalf("a second server on the data directory: %v, want ErrDataDirLocked", err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if code := statusOf(t, "http://"+s.Addr().String()+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz: %d", code)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + s.Addr().String() + "/readyz"); err == nil {
		t.Fatal("still served after Close")
	}
}

// testConfig is the default configuration on a data directory of the
// test's own, listening on listen ("": the program serves Handler).
func testConfig(t *testing.T, listen string) Config {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = listen
	cfg.DiskCheckBudget = 0 // its own tests turn it on (diskcheck_test.go)
	return cfg
}

// newServer is a server New made of testConfig(t, listen).
func newServer(t *testing.T, listen string) *Server {
	t.Helper()
	s, err := New(context.Background(), testConfig(t, listen))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// expectFree fails the test unless addr can be listened on again.
func expectFree(t *testing.T, addr, when string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the listen address %s: %v", when, err)
	}
	l.Close()
}

// statusOf is the status GET url answers, its body read and closed.
func statusOf(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestServer_ConfigIsValidated: New refuses what the daemon's flags
// refuse, with the same words.
func TestServer_ConfigIsValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.MaxInflightBytes = cfg.MaxBodyBytes - 1
	if _, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "max-inflight-bytes") {
		t.Fatalf("%v, want the max-inflight-bytes error", err)
	}
	// Refused before anything touches the disk: it used to take a lock
	// file in the working directory, then fail in runtime.New.
	cfg = DefaultConfig()
	cfg.DataDir = ""
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "data-dir") {
		t.Fatalf("no data directory: %v, want the data-dir error", err)
	}
	cfg = DefaultConfig()
	cfg.Listen, cfg.Metastore = "", "etcd://127.0.0.1:1"
	if _, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "advertise-addr") {
		t.Fatalf("a cluster's node without a listener or an advertised address: %v", err)
	}
}

// TestServer_CloseWithoutStartFreesTheListener: a program whose New
// succeeded and that gives up before Start (another part of it failed)
// closes the server, and the listen address is free again: Close closes
// the own listener whether or not Start ever served it.
func TestServer_CloseWithoutStartFreesTheListener(t *testing.T) {
	s := newServer(t, "127.0.0.1:0")
	addr := s.Addr().String()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	expectFree(t, addr, "after Close without Start")
}

// TestServer_HandlerModeLeavesDescriptorsForTheProgramsConnections: a
// program that serves Handler itself has connections too, so the default
// open-log budget leaves them what the own listener's default cap would
// (docs/operations.md's (limit − 256 − max_connections) / 4): the budget is the same
// whoever serves the API.
func TestServer_HandlerModeLeavesDescriptorsForTheProgramsConnections(t *testing.T) {
	budget := func(listen string) int {
		s := newServer(t, listen)
		defer s.Close()
		return s.cfg.MaxOpenLogs
	}
	if defaultMaxConnections() == 0 {
		t.Fatal("the open-file limit is unlimited here: no budget to compare")
	}
	own, handler := budget("127.0.0.1:0"), budget("")
	if want := runtime.DefaultMaxOpenLogsBeside(defaultMaxConnections()); own != want {
		t.Fatalf("own listener: open-log budget %d, want %d", own, want)
	}
	if handler != own {
		t.Fatalf("Handler served by the program: open-log budget %d, want %d as with the own listener", handler, own)
	}
}

// TestServer_NotReadyOnceClosed: Ready says false once Close ran: a
// closed node serves nothing (its calls answer 503), and a program that
// reports Ready as its own readiness must stop sending traffic to it.
func TestServer_NotReadyOnceClosed(t *testing.T) {
	s := newServer(t, "")
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !s.Ready() {
		t.Fatal("not ready after Start")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Ready() {
		t.Fatal("ready after Close")
	}
}

// TestServer_CloseEndsAStartUnderWay: Close may come from another
// goroutine while Start runs (a program's signal handler): it ends the
// Start (which returns nil if it was ready first, else ErrClosed) and
// stops what it started, so nothing Start would start after Close
// outlives it (goleak), the listen address is free, and a Start after
// Close is refused.
func TestServer_CloseEndsAStartUnderWay(t *testing.T) {
	s := newServer(t, "127.0.0.1:0")
	addr := s.Addr().String()
	started := make(chan error, 1)
	go func() { started <- s.Start(context.Background()) }()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("a Start that Close ended: %v, want nil or ErrClosed", err)
	}
	if s.Ready() {
		t.Fatal("ready after Close")
	}
	expectFree(t, addr, "after Close")
	if err := s.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
}

// TestServer_GathersBesideTheProgramsOwnMetrics: a program gathers the
// node's metrics beside its own, whose registry (the default one) already
// has the Go runtime's and the process's: the two gather together without
// a metric collected twice, and the node's are all there.
func TestServer_GathersBesideTheProgramsOwnMetrics(t *testing.T) {
	s := newServer(t, "")
	defer s.Close()
	mfs, err := prometheus.Gatherers{prometheus.DefaultGatherer, s.Gatherer()}.Gather()
	if err != nil {
		t.Fatalf("the program's metrics and the node's together: %v", err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "narad_http_answer_bytes_in_flight"
	}
	if !found {
		t.Fatal("the node's metrics are missing")
	}
	// GET /metrics serves the process's as before (docs/metrics.md).
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, name := range []string{"go_goroutines", "process_open_fds", "narad_http_answer_bytes_in_flight"} {
		if !strings.Contains(rec.Body.String(), "\n"+name+" ") {
			t.Fatalf("GET /metrics serves no %s:\n%s", name, rec.Body.String())
		}
	}
}

// TestServer_MetricsByTopic: Config.MetricsByTopic reaches the node:
// GET /metrics has the topic's high watermark sum and no per-partition
// gauge (docs/metrics.md, "A scrape at many partitions").
func TestServer_MetricsByTopic(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.MetricsByTopic = true
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := s.Node().CreateTopic(ctx, "orders", 2, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	for p, n := range []int{3, 4} {
		recs := make([]partition.Record, n)
		for i := range recs {
			recs[i] = partition.Record{Value: []byte("v")}
		}
		if _, err := s.Node().Produce(ctx, "orders", p, recs); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, "\nnarad_topic_appended_records{topic=\"orders\"} 7\n") {
		t.Fatalf("no sum of the high watermarks, 7:\n%s", body)
	}
	if strings.Contains(body, "\nnarad_partition_high_watermark{") {
		t.Fatalf("a per-partition gauge with metrics by topic:\n%s", body)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "narad_topic_") { // the sums this test brings in
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}
