package clustertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The daemon tests run the real narad-storaged binary, built once from
// the root module with the race detector, for what needs a process: a
// node killed (no leave, no log closed, its lock released by the
// kernel), the exit code of a refused start, the commands a test runs
// against a cluster. The tests of behaviour run nodes in this process
// (node); a daemon joins them on the same etcd. A daemon listens on a
// loopback port of its own choosing, over its own data directory, and
// the test waits on what it logs, never on a timer.

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
	endpoint
	args    []string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process exited; exitErr is then its end
	exitErr error
}

// startDaemon starts node id on te's etcd over dataDir and returns once
// it is ready; the test kills it if it still runs at the end.
func startDaemon(t testing.TB, te *testEtcd, id, dataDir string, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--metastore", "etcd+unix://" + te.socket, "--node-id", id, "--member-ttl", "2s", "--log-level", "debug",
		"--disk-check-budget", "0"}, extra...) // the disk check is tested in package server
	d := &daemon{endpoint: endpoint{t: t, id: id, dataDir: dataDir}, args: args}
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
	d.restart()
	d.done = make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		addr := ""
		for sc.Scan() {
			line := sc.Text()
			d.Write([]byte(line + "\n"))
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
		d.end()
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

// kill kills the process (SIGKILL) if it still runs.
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
