package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
)

// TestE2E_SecondDaemonOnOneDataDirRefused: a second daemon on a data
// directory that a running one serves refuses to start (exit 2) naming
// the holder's pid, and changes nothing; verify still runs there but says
// the directory is in use; once the first stops, a daemon starts and
// serves every record the first acked (node-level durability, item 1:
// both used to start and ack records only one of them kept).
func TestE2E_SecondDaemonOnOneDataDirRefused(t *testing.T) {
	dir := t.TempDir()
	first := startDaemon(t, dir)
	e2etest.Expect(t, first.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 1}), 201, "")
	e2etest.Expect(t, first.req("POST", "/v1/topics/orders/partitions/0/records", map[string]any{"records": []map[string]string{{"value": "one"}}}), 200, "")

	second := exec.Command(daemonBinary, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir)
	out, err := second.CombinedOutput()
	exit, ok := err.(*exec.ExitError)
	if !ok || exit.ExitCode() != 2 {
		t.Fatalf("second daemon: %v, want exit 2\n%s", err, out)
	}
	holder := fmt.Sprintf("process %d", first.cmd.Process.Pid)
	if !strings.Contains(string(out), "data directory in use") || !strings.Contains(string(out), holder) {
		t.Fatalf("second daemon's refusal does not name %s:\n%s", holder, out)
	}

	out, err = exec.Command(daemonBinary, "verify", "--data-dir", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "in use by "+holder) || !strings.Contains(string(out), "write in flight") {
		t.Fatalf("verify on a data directory in use: %v\n%s", err, out)
	}

	segment := filepath.Join(dir, "topics", "orders", "p00000", "00000000000000000000.log")
	out, err = exec.Command(daemonBinary, "inspect", segment).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "in use by "+holder) {
		t.Fatalf("inspect of a segment in use: %v\n%s", err, out)
	}

	if err := first.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("first daemon: %v\n%s", err, first.log())
	}
	out, err = exec.Command(daemonBinary, "verify", "--data-dir", dir).CombinedOutput()
	if err != nil || strings.Contains(string(out), "in use") {
		t.Fatalf("verify once the daemon stopped: %v\n%s", err, out)
	}
	third := startDaemon(t, dir)
	var fetched struct {
		Records []struct {
			Value string `json:"value"`
		} `json:"records"`
	}
	third.req("GET", "/v1/topics/orders/partitions/0/records?offset=0", nil).JSON(t, &fetched)
	if len(fetched.Records) != 1 || fetched.Records[0].Value != "one" {
		t.Fatalf("after the restart: %+v", fetched)
	}
	third.stop(syscall.SIGTERM)
}
