package server_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The end-to-end tests of the node's behaviour: each runs a whole node in
// this process (server.New and Start on a temporary data directory, its
// own listener on loopback) and talks to it over HTTP as any client
// would, so goleak (main_test.go) sees every goroutine it leaves. They
// decode answers with types of their own, as docs/http-api.md gives
// them, never the server's, so a renamed field fails a test (the
// requests, and the types the process tests use too, are
// internal/e2etest's). They wait on what the node says (Start's return,
// a line of its log), never on a timer. What only a process shows
// (signals, exit codes, flags, systemd, the commands, the limits of a
// process) is tested on the built binary in cmd/narad-storaged.

// node is one in-process server with what the daemon's tests had of a
// process: requests, its log, a clean stop (Close). A restart is a stop,
// then startNode on the same data directory.
type node struct {
	t       *testing.T
	s       *server.Server
	addr    string // scheme://host:port
	dataDir string
	logs    *lineLog
	own     *http.Client // the harness's client, its idle connections closed at stop
	http    *http.Client // requests go through it: own, unless a test sets another
	stopped bool
	stopErr error
}

// startNode starts a node on dataDir with the daemon's defaults, listening
// on 127.0.0.1:0, and returns once it is ready; configure changes the
// configuration first (as a flag would). The node stops at the test's end
// if the test did not stop it.
func startNode(t *testing.T, dataDir string, configure ...func(*server.Config)) *node {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = dataDir
	cfg.Listen = "127.0.0.1:0"
	cfg.DiskCheckBudget = 0 // the disk check's own tests turn it on
	cfg.ScrubRate = 0       // a pass at start would find a test's damage before its reads do; the scrubber's own tests turn it on
	for _, change := range configure {
		change(&cfg)
	}
	logs := newLineLog()
	cfg.Logger = logs.logger()
	ctx := context.Background()
	s, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatalf("new: %v\n%s", err, logs.String())
	}
	own := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	d := &node{t: t, s: s, dataDir: dataDir, logs: logs, own: own, http: own}
	t.Cleanup(func() { d.stop() })
	if err := s.Start(ctx); err != nil {
		t.Fatalf("start: %v\n%s", err, d.log())
	}
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	d.addr = scheme + "://" + s.Addr().String()
	return d
}

// stop closes the node (what SIGTERM does to the daemon) once, and
// returns Close's outcome; the log ends with it.
func (d *node) stop() error {
	if !d.stopped {
		d.stopped = true
		d.stopErr = d.s.Close()
		d.logs.end()
		d.own.CloseIdleConnections()
		d.http.CloseIdleConnections()
	}
	return d.stopErr
}

// hostPort is the node's listen address, for a raw connection.
func (d *node) hostPort() string { return d.s.Addr().String() }

// client is a client of the node over the harness's connections (opts'
// own HTTP client, if it names one).
func (d *node) client(opts client.Options) *client.Client {
	d.t.Helper()
	if opts.HTTPClient == nil {
		opts.HTTPClient = d.http
	}
	c, err := client.New(d.addr, opts)
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// waitLog waits until the node has logged a line holding text (true), or
// it stopped without one (false).
func (d *node) waitLog(text string) bool { return d.logs.wait(text) }

func (d *node) log() string { return d.logs.String() }

// lineLog is a node's log as the daemon writes it, one JSON object a
// line, kept in memory; each line wakes whoever waits for one.
type lineLog struct {
	mu      sync.Mutex
	text    strings.Builder
	changed chan struct{} // closed and replaced at each line and at the end
	ended   bool
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

// logger is a logger writing to l, encoded as the daemon's default
// (--log-format json, --log-level info).
func (l *lineLog) logger() *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), l, zapcore.InfoLevel))
}

// Write takes one line (zap writes an entry in one call).
func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

func (l *lineLog) Sync() error { return nil }

func (l *lineLog) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.ended = true
		close(l.changed)
	}
}

func (l *lineLog) wait(text string) bool {
	for {
		l.mu.Lock()
		found, ended, changed := strings.Contains(l.text.String(), text), l.ended, l.changed
		l.mu.Unlock()
		if found || ended {
			return found
		}
		<-changed
	}
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// api is the node's HTTP API over the harness's connections.
func (d *node) api() e2etest.API { return e2etest.API{Base: d.addr, HTTP: d.http} }

// req sends one request to the node (e2etest.API.Req).
func (d *node) req(method, path string, body any, header ...string) e2etest.Response {
	d.t.Helper()
	return d.api().Req(d.t, method, path, body, header...)
}

// TestE2E_Contract walks every endpoint and error of docs/http-api.md.
func TestE2E_Contract(t *testing.T) {
	d := startNode(t, t.TempDir(), func(c *server.Config) { c.Pprof = true })
	e2etest.Expect(t, d.req("GET", "/healthz", nil), 200, "")
	e2etest.Expect(t, d.req("GET", "/readyz", nil), 200, "")

	// Topics.
	e2etest.Expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 2}), 201, "")
	e2etest.Expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 2}), 200, "")
	e2etest.Expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 3}), 409, "topic_exists")
	// ("..", like any path a URL cleans away, never reaches a topic handler.)
	for _, bad := range []string{"a%2Fb", "x.stale-0123456789abcdef", strings.Repeat("a", 201), "sp%20ace", "%2E%2E%2Fetc"} {
		e2etest.Expect(t, d.req("PUT", "/v1/topics/"+bad, map[string]any{"partitions": 1}), 400, "invalid_topic_name")
	}
	e2etest.Expect(t, d.req("PUT", "/v1/topics/t2", "{not json"), 400, "invalid_body")
	e2etest.Expect(t, d.req("PUT", "/v1/topics/t2", map[string]any{"partitions": 0}), 400, "invalid_body")
	var desc client.Topic
	r := d.req("GET", "/v1/topics/orders", nil)
	e2etest.Expect(t, r, 200, "")
	r.JSON(t, &desc)
	if desc.Name != "orders" || len(desc.Incarnation) != 16 || len(desc.Partitions) != 2 || desc.Partitions[1].HighWatermark != 0 {
		t.Fatalf("describe: %+v", desc)
	}
	e2etest.Expect(t, d.req("GET", "/v1/topics/nope", nil), 404, "topic_not_found")
	var list struct{ Topics []client.Topic }
	d.req("GET", "/v1/topics", nil).JSON(t, &list)
	if len(list.Topics) != 1 {
		t.Fatalf("list: %+v", list)
	}

	// Produce: JSON, base64, binary.
	var prod struct {
		BaseOffset    int64 `json:"base_offset"`
		Count         int64 `json:"count"`
		HighWatermark int64 `json:"high_watermark"`
	}
	r = d.req("POST", "/v1/topics/orders/partitions/0/records", `{"records": [{"key": "user-42", "value": "{\"total\": 12.5}"}, {"value": "no key"}]}`)
	e2etest.Expect(t, r, 200, "")
	r.JSON(t, &prod)
	if prod.BaseOffset != 0 || prod.Count != 2 || prod.HighWatermark != 2 {
		t.Fatalf("produce: %+v", prod)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff})
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records?encoding=base64", fmt.Sprintf(`{"records":[{"key":%q,"value":%q}]}`, b64, b64)), 200, "")
	var batch []byte
	for _, kv := range [][2]string{{"k1", "binary one"}, {"", "binary two"}} {
		batch = binary.AppendUvarint(batch, uint64(len(kv[0])))
		batch = append(batch, kv[0]...)
		batch = binary.AppendUvarint(batch, uint64(len(kv[1])))
		batch = append(batch, kv[1]...)
	}
	r = d.req("POST", "/v1/topics/orders/partitions/0/records", batch, "Content-Type", e2etest.BatchContentType)
	e2etest.Expect(t, r, 200, "")
	r.JSON(t, &prod)
	if prod.BaseOffset != 3 || prod.Count != 2 {
		t.Fatalf("binary produce: %+v", prod)
	}
	for _, bad := range []string{`{"records": []}`, `nope`, `{"records":[{"value": 5}]}`} {
		e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", bad), 400, "invalid_body")
	}
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records?encoding=base64", `{"records":[{"value":"!!"}]}`), 400, "invalid_body")
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", []byte{0x05, 'a'}, "Content-Type", e2etest.BatchContentType), 400, "invalid_body")
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/9/records", `{"records":[{"value":"x"}]}`), 404, "partition_not_found")
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/-1/records", `{"records":[{"value":"x"}]}`), 404, "partition_not_found")
	e2etest.Expect(t, d.req("POST", "/v1/topics/nope/partitions/0/records", `{"records":[{"value":"x"}]}`), 404, "topic_not_found")
	// A body of nothing but empty records: bounded by count, not decoded whole.
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", make([]byte, 1<<20), "Content-Type", e2etest.BatchContentType), 413, "batch_too_large")
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", `{"records":[`+strings.Repeat(`{"value":""},`, 200000)+`{"value":""}]}`), 413, "batch_too_large")
	big := `{"records":[{"value":"` + strings.Repeat("x", 70<<20) + `"}]}`
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", big), 413, "batch_too_large")

	// Fetch: JSON, base64, binary, limits, errors.
	var f e2etest.Fetched
	r = d.req("GET", "/v1/topics/orders/partitions/0/records?offset=0", nil)
	e2etest.Expect(t, r, 200, "")
	r.JSON(t, &f)
	if len(f.Records) != 5 || f.NextOffset != 5 || f.HighWatermark != 5 || *f.Records[0].Key != "user-42" || f.Records[1].Key != nil || f.Records[4].Value != "binary two" {
		t.Fatalf("fetch: %+v", f)
	}
	d.req("GET", "/v1/topics/orders/partitions/0/records?offset=2&encoding=base64&max_records=1", nil).JSON(t, &f)
	if len(f.Records) != 1 || f.Records[0].Value != b64 || f.NextOffset != 3 {
		t.Fatalf("base64 fetch: %+v", f)
	}
	d.req("GET", "/v1/topics/orders/partitions/0/records?offset=0&max_bytes=1", nil).JSON(t, &f)
	if len(f.Records) != 1 {
		t.Fatalf("max_bytes=1 returned %d records, want at least one", len(f.Records))
	}
	r = d.req("GET", "/v1/topics/orders/partitions/0/records?offset=3", nil, "Accept", e2etest.BatchContentType)
	e2etest.Expect(t, r, 200, "")
	if r.Header.Get("Narad-Next-Offset") != "5" || r.Header.Get("Narad-High-Watermark") != "5" || binary.BigEndian.Uint64(r.Body) != 3 {
		t.Fatalf("binary fetch: %v %x", r.Header, r.Body)
	}
	for _, bad := range []string{"", "-1", "abc"} {
		e2etest.Expect(t, d.req("GET", "/v1/topics/orders/partitions/0/records?offset="+bad, nil), 400, "invalid_offset")
	}
	e2etest.Expect(t, d.req("GET", "/v1/topics/orders/partitions/0/records?offset=6", nil), 416, "offset_beyond_high_watermark")
	d.req("GET", "/v1/topics/orders/partitions/0/records?offset=5", nil).JSON(t, &f)
	if len(f.Records) != 0 || f.NextOffset != 5 {
		t.Fatalf("fetch at the high watermark: %+v", f)
	}

	// Consumer progress.
	var ack struct{ Frontier int64 }
	d.req("POST", "/v1/topics/orders/partitions/0/acks", map[string]any{"offsets": []int{0, 2, 3}}).JSON(t, &ack)
	if ack.Frontier != 1 {
		t.Fatalf("frontier %d, want 1", ack.Frontier)
	}
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/acks", map[string]any{"offsets": []int{5}}), 400, "invalid_offset")
	var cs struct {
		Frontier   int64   `json:"frontier"`
		AckedAhead []int64 `json:"acked_ahead"`
	}
	d.req("GET", "/v1/topics/orders/partitions/0/consumer", nil).JSON(t, &cs)
	if cs.Frontier != 1 || fmt.Sprint(cs.AckedAhead) != "[2 3]" {
		t.Fatalf("consumer: %+v", cs)
	}

	// Retention change, operations, delete.
	r = d.req("PATCH", "/v1/topics/orders", map[string]any{"retention_ms": 3600000})
	e2etest.Expect(t, r, 200, "")
	r.JSON(t, &desc)
	if desc.RetentionMs != 3600000 {
		t.Fatalf("patch: %+v", desc)
	}
	metrics := string(d.req("GET", "/metrics", nil).Body)
	for _, name := range []string{"narad_storage_commit_seconds", "narad_consumer_acks_total", "narad_storage_open_logs", "narad_reaper_restarts"} {
		if !strings.Contains(metrics, name) {
			t.Fatalf("/metrics lacks %s", name)
		}
	}
	e2etest.Expect(t, d.req("GET", "/debug/pprof/", nil), 200, "")
	e2etest.Expect(t, d.req("DELETE", "/v1/topics/orders", nil), 204, "")
	e2etest.Expect(t, d.req("GET", "/v1/topics/orders", nil), 404, "topic_not_found")
	e2etest.Expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 1}), 201, "")
	d.req("GET", "/v1/topics/orders/partitions/0/records?offset=0", nil).JSON(t, &f)
	if f.HighWatermark != 0 {
		t.Fatalf("a recreated topic holds %d records", f.HighWatermark)
	}
	e2etest.Expect(t, d.req("GET", "/nowhere", nil), 404, "not_found")
	entries, _ := os.ReadDir(filepath.Join(d.dataDir, "topics"))
	for _, e := range entries {
		if e.Name() != "orders" {
			t.Fatalf("unexpected directory %s: bad input created a file", e.Name())
		}
	}
	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
}

// TestE2E_AuthGuardsEveryEndpointButHealthz: a token guards every
// endpoint but /healthz; the data directory is made 0700. (That the
// daemon refuses a token file others can read, or a non-loopback
// --listen without a token, is cmd/narad-storaged's
// TestE2E_RefusesAnOpenTokenOrAnUnguardedListen.)
func TestE2E_AuthGuardsEveryEndpointButHealthz(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	d := startNode(t, filepath.Join(dir, "data"), func(c *server.Config) { c.AuthTokenFile = tokenFile })
	e2etest.Expect(t, d.req("GET", "/healthz", nil), 200, "")
	e2etest.Expect(t, d.req("GET", "/v1/topics", nil), 401, "unauthorized")
	e2etest.Expect(t, d.req("GET", "/v1/topics", nil, "Authorization", "Bearer wrong"), 401, "unauthorized")
	e2etest.Expect(t, d.req("GET", "/v1/topics", nil, "Authorization", "Bearer s3cret"), 200, "")
	e2etest.Expect(t, d.req("GET", "/v1/topics", nil, "Authorization", "bearer s3cret"), 200, "") // the scheme is case-insensitive
	e2etest.Expect(t, d.req("GET", "/v1/topics", nil, "Authorization", "Basic s3cret"), 401, "unauthorized")
	d.stop()
	if fi, err := os.Stat(filepath.Join(dir, "data")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode: %v %v", fi.Mode(), err)
	}
}

// TestE2E_LongPollWakesOnCommit: a fetch at the high watermark with
// wait_ms returns the record a later produce commits, woken by the log's
// broadcast, well before its wait runs out.
func TestE2E_LongPollWakesOnCommit(t *testing.T) {
	d := startNode(t, t.TempDir())
	d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 1})
	got := make(chan e2etest.Fetched, 1)
	go func() {
		var f e2etest.Fetched
		resp, err := d.http.Get(d.addr + "/v1/topics/orders/partitions/0/records?offset=0&wait_ms=60000")
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&f)
			resp.Body.Close()
		}
		got <- f
	}()
	// Produce until the poll has its record: the first produce may land
	// before the poll starts waiting, which returns it at once too.
	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", `{"records":[{"value":"wake"}]}`), 200, "")
	f := <-got
	if len(f.Records) != 1 || f.Records[0].Value != "wake" {
		t.Fatalf("long poll returned %+v", f)
	}
	d.stop()
}
