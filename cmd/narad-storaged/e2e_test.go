package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
)

// The end-to-end tests of the process: they build the real binary once
// (with -race) and run it on loopback with a temporary data directory,
// for what only a process shows: signals (SIGTERM, SIGKILL, SIGHUP), exit
// codes, flags, systemd notification, the commands (produce, consume,
// verify, inspect, version, completion), the limits of a process (open
// files, a mount namespace) and its peak memory. They wait on what the
// daemon says (its "ready" log line, its exit), never on a timer. The
// node's behaviour (the HTTP API and what it answers) is tested in
// process, in package server's e2e tests; the requests and the answers'
// types both share are internal/e2etest's.

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
	// The disk check is off but where a test turns it on (a later flag
	// wins): every start would pay it.
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--disk-check-budget", "0"}, extra...)
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

// api is the daemon's HTTP API (over d.http, if a test set one).
func (d *daemon) api() e2etest.API { return e2etest.API{Base: d.addr, HTTP: d.http} }

// req sends one request to the daemon (e2etest.API.Req).
func (d *daemon) req(method, path string, body any, header ...string) e2etest.Response {
	d.t.Helper()
	return d.api().Req(d.t, method, path, body, header...)
}

// TestE2E_RefusesAnOpenTokenOrAnUnguardedListen: the daemon refuses to
// start, with a non-zero exit naming why, on a token file others can
// read (as ssh refuses such keys), and on a non-loopback --listen
// without a token or --insecure. (What the token guards is package
// server's TestE2E_AuthGuardsEveryEndpointButHealthz.)
func TestE2E_RefusesAnOpenTokenOrAnUnguardedListen(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o644)
	out, err := exec.Command(daemonBinary, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--auth-token-file", tokenFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "readable by group or others") {
		t.Fatalf("a world-readable token file was accepted: %v %s", err, out)
	}

	out, err = exec.Command(daemonBinary, "serve", "--listen", "0.0.0.0:0", "--data-dir", filepath.Join(dir, "d2")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not loopback") {
		t.Fatalf("non-loopback listen without a token started: %v %s", err, out)
	}
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
		var f e2etest.Fetched
		r := d.req("GET", fmt.Sprintf("/v1/topics/orders/partitions/0/records?offset=%d&max_records=1000", offset), nil)
		e2etest.Expect(t, r, 200, "")
		r.JSON(t, &f)
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
