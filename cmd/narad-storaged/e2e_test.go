package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/narad-io/storage/client"
)

// The end-to-end tests build the real binary once and run it on loopback
// with a temporary data directory. They wait on what the daemon says (its
// "ready" log line, its exit), never on a timer.

var daemonBinary string

// daemonWrap, when a test sets it, runs the daemon as daemonWrap then its
// path and arguments.
var daemonWrap []string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "narad-e2e")
	if err != nil {
		panic(err)
	}
	daemonBinary = filepath.Join(dir, "narad-storaged")
	build := exec.Command("go", "build", "-race", "-buildvcs=auto", "-o", daemonBinary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("build: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type daemon struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	dataDir string
	exited  chan error
	logs    *bytes.Buffer
	logMu   *sync.Mutex
	logged  *sync.Cond // on logMu: a line was logged, or the log ended
	logEnd  bool
	http    *http.Client // requests go through it; nil: http.DefaultClient
}

// startDaemon starts the binary and returns once it logs "ready".
func startDaemon(t *testing.T, dataDir string, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir}, extra...)
	cmd := exec.Command(daemonBinary, args...)
	if daemonWrap != nil { // a test runs the daemon under a wrapper (a lower limit, say)
		cmd = exec.Command(daemonWrap[0], append(append(daemonWrap[1:], daemonBinary), args...)...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, cmd: cmd, dataDir: dataDir, exited: make(chan error, 1), logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	d.logged = sync.NewCond(d.logMu)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		addr := ""
		for sc.Scan() {
			line := sc.Text()
			d.logMu.Lock()
			d.logs.WriteString(line + "\n")
			d.logged.Broadcast()
			d.logMu.Unlock()
			var entry struct {
				Msg    string `json:"msg"`
				Addr   string `json:"addr"`
				Scheme string `json:"scheme"`
			}
			if json.Unmarshal([]byte(line), &entry) != nil {
				continue
			}
			if entry.Msg == "listening" {
				addr = entry.Scheme + "://" + entry.Addr
			}
			if entry.Msg == "ready" {
				ready <- addr
			}
		}
		d.logMu.Lock()
		d.logEnd = true
		d.logged.Broadcast()
		d.logMu.Unlock()
		close(ready)
	}()
	go func() { d.exited <- cmd.Wait() }()
	addr, ok := <-ready
	if !ok {
		<-d.exited
		t.Fatalf("daemon exited before ready:\n%s", d.log())
	}
	d.addr = addr
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			<-d.exited
		}
	})
	return d
}

// waitLog waits until the daemon has logged a line holding text (true),
// or its log ended without one (false).
func (d *daemon) waitLog(text string) bool {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	for !strings.Contains(d.logs.String(), text) {
		if d.logEnd {
			return false
		}
		d.logged.Wait()
	}
	return true
}

func (d *daemon) log() string {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return d.logs.String()
}

// stop sends sig and waits for the exit.
func (d *daemon) stop(sig syscall.Signal) error {
	d.cmd.Process.Signal(sig)
	return <-d.exited
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (d *daemon) req(method, path string, body any, header ...string) response {
	d.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, d.addr+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	hc := d.http
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

// batchContentType is the binary batch's media type (docs/http-api.md).
const batchContentType = "application/vnd.narad.batch"

// errorBody is an error answer as docs/http-api.md gives it, decoded
// apart from the server's own type, so a renamed field fails a test.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	NextOffset *int64 `json:"next_offset"`
}

func (r response) code(t *testing.T) string {
	t.Helper()
	var e errorBody
	r.json(t, &e)
	return e.Error.Code
}

func expect(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if code != "" {
		if got := r.code(t); got != code {
			t.Fatalf("error code %q, want %q: %s", got, code, r.body)
		}
	}
}

type fetched struct {
	Records []struct {
		Offset        int64   `json:"offset"`
		Key           *string `json:"key"`
		Value         string  `json:"value"`
		CommittedAtMs int64   `json:"committed_at_ms"`
	} `json:"records"`
	NextOffset    int64 `json:"next_offset"`
	HighWatermark int64 `json:"high_watermark"`
}

// TestE2E_Contract walks every endpoint and error of docs/http-api.md.
func TestE2E_Contract(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "--pprof")
	expect(t, d.req("GET", "/healthz", nil), 200, "")
	expect(t, d.req("GET", "/readyz", nil), 200, "")

	// Topics.
	expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 2}), 201, "")
	expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 2}), 200, "")
	expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 3}), 409, "topic_exists")
	// ("..", like any path a URL cleans away, never reaches a topic handler.)
	for _, bad := range []string{"a%2Fb", "x.stale-0123456789abcdef", strings.Repeat("a", 201), "sp%20ace", "%2E%2E%2Fetc"} {
		expect(t, d.req("PUT", "/v1/topics/"+bad, map[string]any{"partitions": 1}), 400, "invalid_topic_name")
	}
	expect(t, d.req("PUT", "/v1/topics/t2", "{not json"), 400, "invalid_body")
	expect(t, d.req("PUT", "/v1/topics/t2", map[string]any{"partitions": 0}), 400, "invalid_body")
	var desc client.Topic
	r := d.req("GET", "/v1/topics/orders", nil)
	expect(t, r, 200, "")
	r.json(t, &desc)
	if desc.Name != "orders" || len(desc.Incarnation) != 16 || len(desc.Partitions) != 2 || desc.Partitions[1].HighWatermark != 0 {
		t.Fatalf("describe: %+v", desc)
	}
	expect(t, d.req("GET", "/v1/topics/nope", nil), 404, "topic_not_found")
	var list struct{ Topics []client.Topic }
	d.req("GET", "/v1/topics", nil).json(t, &list)
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
	expect(t, r, 200, "")
	r.json(t, &prod)
	if prod.BaseOffset != 0 || prod.Count != 2 || prod.HighWatermark != 2 {
		t.Fatalf("produce: %+v", prod)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff})
	expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records?encoding=base64", fmt.Sprintf(`{"records":[{"key":%q,"value":%q}]}`, b64, b64)), 200, "")
	var batch []byte
	for _, kv := range [][2]string{{"k1", "binary one"}, {"", "binary two"}} {
		batch = binary.AppendUvarint(batch, uint64(len(kv[0])))
		batch = append(batch, kv[0]...)
		batch = binary.AppendUvarint(batch, uint64(len(kv[1])))
		batch = append(batch, kv[1]...)
	}
	r = d.req("POST", "/v1/topics/orders/partitions/0/records", batch, "Content-Type", batchContentType)
	expect(t, r, 200, "")
	r.json(t, &prod)
	if prod.BaseOffset != 3 || prod.Count != 2 {
		t.Fatalf("binary produce: %+v", prod)
	}
	for _, bad := range []string{`{"records": []}`, `nope`, `{"records":[{"value": 5}]}`} {
		expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", bad), 400, "invalid_body")
	}
	expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records?encoding=base64", `{"records":[{"value":"!!"}]}`), 400, "invalid_body")
	expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", []byte{0x05, 'a'}, "Content-Type", batchContentType), 400, "invalid_body")
	expect(t, d.req("POST", "/v1/topics/orders/partitions/9/records", `{"records":[{"value":"x"}]}`), 404, "partition_not_found")
	expect(t, d.req("POST", "/v1/topics/orders/partitions/-1/records", `{"records":[{"value":"x"}]}`), 404, "partition_not_found")
	expect(t, d.req("POST", "/v1/topics/nope/partitions/0/records", `{"records":[{"value":"x"}]}`), 404, "topic_not_found")
	// A body of nothing but empty records: bounded by count, not decoded whole.
	expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", make([]byte, 1<<20), "Content-Type", batchContentType), 413, "batch_too_large")
	expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", `{"records":[`+strings.Repeat(`{"value":""},`, 200000)+`{"value":""}]}`), 413, "batch_too_large")
	big := `{"records":[{"value":"` + strings.Repeat("x", 70<<20) + `"}]}`
	expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", big), 413, "batch_too_large")

	// Fetch: JSON, base64, binary, limits, errors.
	var f fetched
	r = d.req("GET", "/v1/topics/orders/partitions/0/records?offset=0", nil)
	expect(t, r, 200, "")
	r.json(t, &f)
	if len(f.Records) != 5 || f.NextOffset != 5 || f.HighWatermark != 5 || *f.Records[0].Key != "user-42" || f.Records[1].Key != nil || f.Records[4].Value != "binary two" {
		t.Fatalf("fetch: %+v", f)
	}
	d.req("GET", "/v1/topics/orders/partitions/0/records?offset=2&encoding=base64&max_records=1", nil).json(t, &f)
	if len(f.Records) != 1 || f.Records[0].Value != b64 || f.NextOffset != 3 {
		t.Fatalf("base64 fetch: %+v", f)
	}
	d.req("GET", "/v1/topics/orders/partitions/0/records?offset=0&max_bytes=1", nil).json(t, &f)
	if len(f.Records) != 1 {
		t.Fatalf("max_bytes=1 returned %d records, want at least one", len(f.Records))
	}
	r = d.req("GET", "/v1/topics/orders/partitions/0/records?offset=3", nil, "Accept", batchContentType)
	expect(t, r, 200, "")
	if r.header.Get("Narad-Next-Offset") != "5" || r.header.Get("Narad-High-Watermark") != "5" || binary.BigEndian.Uint64(r.body) != 3 {
		t.Fatalf("binary fetch: %v %x", r.header, r.body)
	}
	for _, bad := range []string{"", "-1", "abc"} {
		expect(t, d.req("GET", "/v1/topics/orders/partitions/0/records?offset="+bad, nil), 400, "invalid_offset")
	}
	expect(t, d.req("GET", "/v1/topics/orders/partitions/0/records?offset=6", nil), 416, "offset_beyond_high_watermark")
	d.req("GET", "/v1/topics/orders/partitions/0/records?offset=5", nil).json(t, &f)
	if len(f.Records) != 0 || f.NextOffset != 5 {
		t.Fatalf("fetch at the high watermark: %+v", f)
	}

	// Consumer progress.
	var ack struct{ Frontier int64 }
	d.req("POST", "/v1/topics/orders/partitions/0/acks", map[string]any{"offsets": []int{0, 2, 3}}).json(t, &ack)
	if ack.Frontier != 1 {
		t.Fatalf("frontier %d, want 1", ack.Frontier)
	}
	expect(t, d.req("POST", "/v1/topics/orders/partitions/0/acks", map[string]any{"offsets": []int{5}}), 400, "invalid_offset")
	var cs struct {
		Frontier   int64   `json:"frontier"`
		AckedAhead []int64 `json:"acked_ahead"`
	}
	d.req("GET", "/v1/topics/orders/partitions/0/consumer", nil).json(t, &cs)
	if cs.Frontier != 1 || fmt.Sprint(cs.AckedAhead) != "[2 3]" {
		t.Fatalf("consumer: %+v", cs)
	}

	// Retention change, operations, delete.
	r = d.req("PATCH", "/v1/topics/orders", map[string]any{"retention_ms": 3600000})
	expect(t, r, 200, "")
	r.json(t, &desc)
	if desc.RetentionMs != 3600000 {
		t.Fatalf("patch: %+v", desc)
	}
	metrics := string(d.req("GET", "/metrics", nil).body)
	for _, name := range []string{"narad_storage_commit_seconds", "narad_consumer_acks_total", "narad_storage_open_logs", "narad_reaper_restarts"} {
		if !strings.Contains(metrics, name) {
			t.Fatalf("/metrics lacks %s", name)
		}
	}
	expect(t, d.req("GET", "/debug/pprof/", nil), 200, "")
	expect(t, d.req("DELETE", "/v1/topics/orders", nil), 204, "")
	expect(t, d.req("GET", "/v1/topics/orders", nil), 404, "topic_not_found")
	expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 1}), 201, "")
	d.req("GET", "/v1/topics/orders/partitions/0/records?offset=0", nil).json(t, &f)
	if f.HighWatermark != 0 {
		t.Fatalf("a recreated topic holds %d records", f.HighWatermark)
	}
	expect(t, d.req("GET", "/nowhere", nil), 404, "not_found")
	entries, _ := os.ReadDir(filepath.Join(d.dataDir, "topics"))
	for _, e := range entries {
		if e.Name() != "orders" {
			t.Fatalf("unexpected directory %s: bad input created a file", e.Name())
		}
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, d.log())
	}
}

// TestE2E_AuthAndListen: a token guards every endpoint but /healthz; a
// non-loopback --listen refuses to start without a token or --insecure.
func TestE2E_AuthAndListen(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	d := startDaemon(t, filepath.Join(dir, "data"), "--auth-token-file", tokenFile)
	expect(t, d.req("GET", "/healthz", nil), 200, "")
	expect(t, d.req("GET", "/v1/topics", nil), 401, "unauthorized")
	expect(t, d.req("GET", "/v1/topics", nil, "Authorization", "Bearer wrong"), 401, "unauthorized")
	expect(t, d.req("GET", "/v1/topics", nil, "Authorization", "Bearer s3cret"), 200, "")
	expect(t, d.req("GET", "/v1/topics", nil, "Authorization", "bearer s3cret"), 200, "") // the scheme is case-insensitive
	expect(t, d.req("GET", "/v1/topics", nil, "Authorization", "Basic s3cret"), 401, "unauthorized")
	d.stop(syscall.SIGTERM)

	// A token file others can read is refused, as ssh refuses such keys.
	os.Chmod(tokenFile, 0o644)
	out, err := exec.Command(daemonBinary, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--auth-token-file", tokenFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "readable by group or others") {
		t.Fatalf("a world-readable token file was accepted: %v %s", err, out)
	}

	out, err = exec.Command(daemonBinary, "serve", "--listen", "0.0.0.0:0", "--data-dir", filepath.Join(dir, "d2")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not loopback") {
		t.Fatalf("non-loopback listen without a token started: %v %s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(dir, "data")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode: %v %v", fi.Mode(), err)
	}
}

// TestE2E_LongPollWakesOnCommit: a fetch at the high watermark with
// wait_ms returns the record a later produce commits, woken by the log's
// broadcast, well before its wait runs out.
func TestE2E_LongPollWakesOnCommit(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 1})
	got := make(chan fetched, 1)
	go func() {
		var f fetched
		resp, err := http.Get(d.addr + "/v1/topics/orders/partitions/0/records?offset=0&wait_ms=60000")
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&f)
			resp.Body.Close()
		}
		got <- f
	}()
	// Produce until the poll has its record: the first produce may land
	// before the poll starts waiting, which returns it at once too.
	expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", `{"records":[{"value":"wake"}]}`), 200, "")
	f := <-got
	if len(f.Records) != 1 || f.Records[0].Value != "wake" {
		t.Fatalf("long poll returned %+v", f)
	}
	d.stop(syscall.SIGTERM)
}

// TestE2E_SigtermWritesHWMFiles: a graceful stop closes every log, each
// hwm file holding its exact high watermark.
func TestE2E_SigtermWritesHWMFiles(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 2})
	for i := range 7 {
		d.req("POST", fmt.Sprintf("/v1/topics/orders/partitions/%d/records", i%2), `{"records":[{"value":"x"}]}`)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
	for p, want := range []uint64{4, 3} {
		b, err := os.ReadFile(filepath.Join(d.dataDir, "topics", "orders", fmt.Sprintf("p%05d", p), "hwm"))
		if err != nil || len(b) != 8 || binary.BigEndian.Uint64(b) != want {
			t.Fatalf("partition %d hwm file %v %v, want %d", p, b, err, want)
		}
	}
}

// TestE2E_SigkillLosesNoAckedRecord: SIGKILL at random moments under
// concurrent produce loses no acked record, serves no record never sent,
// and keeps offsets contiguous.
func TestE2E_SigkillLosesNoAckedRecord(t *testing.T) {
	dir := t.TempDir()
	acked := map[int64]string{}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	seq := 0
	for round := range 3 {
		d := startDaemon(t, dir)
		d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 1})
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					seq++
					v := fmt.Sprintf("r%d-w%d-%d-%d", round, w, i, seq)
					mu.Unlock()
					resp, err := http.Post(d.addr+"/v1/topics/orders/partitions/0/records", "application/json",
						strings.NewReader(fmt.Sprintf(`{"records":[{"value":%q}]}`, v)))
					if err != nil {
						return // killed
					}
					var out struct {
						BaseOffset *int64 `json:"base_offset"`
					}
					derr := json.NewDecoder(resp.Body).Decode(&out)
					resp.Body.Close()
					// An answer cut by the kill is no answer: not an ack.
					if resp.StatusCode == 200 && derr == nil && out.BaseOffset != nil {
						mu.Lock()
						acked[*out.BaseOffset] = v
						mu.Unlock()
					}
				}
			}()
		}
		// Let some produces land, then kill at a random moment.
		for range 20 + rng.IntN(200) {
			d.req("GET", "/healthz", nil)
		}
		d.cmd.Process.Kill()
		<-d.exited
		close(stop)
		wg.Wait()
	}
	d := startDaemon(t, dir)
	defer d.stop(syscall.SIGTERM)
	seen := map[int64]string{}
	for offset := int64(0); ; {
		var f fetched
		r := d.req("GET", fmt.Sprintf("/v1/topics/orders/partitions/0/records?offset=%d&max_records=1000", offset), nil)
		expect(t, r, 200, "")
		r.json(t, &f)
		for _, rec := range f.Records {
			if rec.Offset != offset {
				t.Fatalf("offsets not contiguous: got %d, want %d", rec.Offset, offset)
			}
			if !strings.HasPrefix(rec.Value, "r") {
				t.Fatalf("offset %d holds %q, never sent", rec.Offset, rec.Value)
			}
			seen[rec.Offset] = rec.Value
			offset++
		}
		if offset >= f.HighWatermark {
			break
		}
	}
	for off, v := range acked {
		if seen[off] != v {
			t.Fatalf("acked record %q at offset %d lost (found %q)", v, off, seen[off])
		}
	}
	if len(acked) == 0 {
		t.Fatal("no produce was acked: the test proved nothing")
	}
	t.Logf("%d acked records survived 3 SIGKILLs; %d records held", len(acked), len(seen))
}
