package clustertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
)

// The three-daemon tests run the real narad-storaged binary, built once
// from the root module with the race detector, as a cluster on an
// embedded etcd: each on a loopback port of its own choosing, each with
// its own data directory. They wait on what the daemons log, never on a
// timer.

var (
	daemonBuild sync.Once
	daemonPath  string
	daemonErr   error
	daemonDir   string // removed by TestMain
	// rootModule is the root module's directory, taken before any test
	// changes the working directory (startEtcd does).
	rootModule, _ = filepath.Abs("../..")
)

// daemonBinary builds the daemon the first time a test needs it.
func daemonBinary(t testing.TB) string {
	t.Helper()
	daemonBuild.Do(func() {
		daemonDir, daemonErr = os.MkdirTemp("", "narad-cluster")
		if daemonErr != nil {
			return
		}
		daemonPath = filepath.Join(daemonDir, "narad-storaged")
		build := exec.Command("go", "build", "-race", "-o", daemonPath, "./cmd/narad-storaged")
		build.Dir = rootModule
		var out bytes.Buffer
		build.Stdout, build.Stderr = &out, &out
		if err := build.Run(); err != nil {
			daemonErr = &buildError{err: err, out: out.String()}
		}
	})
	if daemonErr != nil {
		t.Fatalf("build narad-storaged: %v", daemonErr)
	}
	return daemonPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// daemon is one running narad-storaged of a cluster.
type daemon struct {
	t       testing.TB
	id      string
	dataDir string
	args    []string
	cmd     *exec.Cmd
	addr    string        // http://127.0.0.1:port
	done    chan struct{} // closed once the process exited; exitErr is then its end
	exitErr error

	logMu  sync.Mutex
	logs   bytes.Buffer
	logged *sync.Cond // on logMu: a line was logged, or the log ended
	logEnd bool
}

// startDaemon starts node id on te's etcd over dataDir and returns once
// it is ready; the test kills it if it still runs at the end.
func startDaemon(t testing.TB, te *testEtcd, id, dataDir string, extra ...string) *daemon {
	t.Helper()
	return startDaemonOn(t, te.socket, id, dataDir, extra...)
}

// startDaemonOn is startDaemon reaching etcd at the Unix socket socket
// (a proxy's).
func startDaemonOn(t testing.TB, socket, id, dataDir string, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--metastore", "etcd+unix://" + socket, "--node-id", id, "--member-ttl", "2s", "--log-level", "debug"}, extra...)
	d := &daemon{t: t, id: id, dataDir: dataDir, args: args}
	d.start()
	t.Cleanup(d.kill)
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	d.cmd = exec.Command(daemonBinary(d.t), d.args...)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		d.t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.logMu.Lock()
	d.logs.Reset()
	d.logEnd = false
	d.logged = sync.NewCond(&d.logMu)
	d.logMu.Unlock()
	d.done = make(chan struct{})
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
				Msg, Addr, Scheme string
			}
			if json.Unmarshal([]byte(line), &entry) != nil {
				continue
			}
			switch entry.Msg {
			case "listening":
				addr = entry.Scheme + "://" + entry.Addr
			case "ready":
				ready <- addr
			}
		}
		d.logMu.Lock()
		d.logEnd = true
		d.logged.Broadcast()
		d.logMu.Unlock()
		close(ready)
	}()
	go func() {
		d.exitErr = d.cmd.Wait()
		close(d.done)
	}()
	addr, ok := <-ready
	if !ok {
		<-d.done
		d.t.Fatalf("node %s exited before ready (%v):\n%s", d.id, d.exitErr, d.log())
	}
	d.addr = addr
}

// stop stops the node gracefully (SIGTERM: it leaves the cluster, closes
// every log) and fails the test if it did not exit cleanly, or not within
// logWaitLimit (a stop that cannot end fails the test, never hangs it).
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	limit := time.NewTimer(logWaitLimit)
	defer limit.Stop()
	select {
	case <-d.done:
	case <-limit.C:
		d.t.Fatalf("node %s did not exit within %v of its SIGTERM:\n%s", d.id, logWaitLimit, d.log())
	}
	if d.exitErr != nil {
		d.t.Fatalf("node %s: %v\n%s", d.id, d.exitErr, d.log())
	}
}

func (d *daemon) kill() {
	select {
	case <-d.done:
	default:
		d.cmd.Process.Kill()
		<-d.done
	}
	if d.t.Failed() {
		d.t.Logf("node %s's log:\n%s", d.id, d.log())
	}
}

// waitLog waits until the node has logged a line holding text since it
// last started, and says whether it did before its log ended (or a
// minute passed: a wait that cannot end fails the test, never hangs it).
func (d *daemon) waitLog(text string) bool { return d.waitLogCount(text, 1) }

// logWaitLimit bounds a wait for a log line.
const logWaitLimit = time.Minute

// logCount counts the node's log lines holding text.
func (d *daemon) logCount(text string) int {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return strings.Count(d.logs.String(), text)
}

// waitLogCount waits until the node has logged n lines holding text (as
// waitLog).
func (d *daemon) waitLogCount(text string, n int) bool {
	deadline := time.Now().Add(logWaitLimit)
	wake := time.AfterFunc(logWaitLimit, func() {
		d.logMu.Lock()
		d.logged.Broadcast()
		d.logMu.Unlock()
	})
	defer wake.Stop()
	d.logMu.Lock()
	defer d.logMu.Unlock()
	for strings.Count(d.logs.String(), text) < n {
		if d.logEnd || !time.Now().Before(deadline) {
			return false
		}
		d.logged.Wait()
	}
	return true
}

// waitApplied waits until the node's replica has applied topic's record
// of incarnation with an owner for each of its partitions (the daemon's
// debug line "topic record applied").
func (d *daemon) waitApplied(topic, incarnation string, partitions int) {
	d.t.Helper()
	d.logMu.Lock()
	defer d.logMu.Unlock()
	for {
		for _, line := range strings.Split(d.logs.String(), "\n") {
			var e struct {
				Msg, Topic, Incarnation string
				Owned                   int `json:"partitions_with_owner"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "topic record applied" &&
				e.Topic == topic && e.Incarnation == incarnation && e.Owned == partitions {
				return
			}
		}
		if d.logEnd {
			d.t.Fatalf("node %s never applied %s of incarnation %s with owners", d.id, topic, incarnation)
		}
		d.logged.Wait()
	}
}

func (d *daemon) log() string {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return d.logs.String()
}

// client is a Go client of the cluster made with this node's address.
func (d *daemon) client() *client.Client {
	d.t.Helper()
	c, err := client.New(d.addr, client.Options{})
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// get sends a GET to the node itself, following nothing.
func (d *daemon) get(path string) (int, []byte) {
	d.t.Helper()
	resp, err := http.Get(d.addr + path)
	if err != nil {
		d.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// startNodes starts one daemon per id, each over a fresh data directory.
func startNodes(t *testing.T, te *testEtcd, ids ...string) []*daemon {
	t.Helper()
	out := make([]*daemon, len(ids))
	for i, id := range ids {
		out[i] = startDaemon(t, te, id, filepath.Join(t.TempDir(), id))
	}
	return out
}

// runToExit runs the daemon with args until it exits by itself, and
// returns its exit code and what it logged.
func runToExit(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(daemonBinary(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	}
	t.Fatalf("run narad-storaged: %v", err)
	return 0, ""
}
