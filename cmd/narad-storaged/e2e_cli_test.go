package main

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
)

// cli runs the binary with args and stdin, and returns its stdout, stderr
// and exit code.
func cli(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(daemonBinary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestE2E_ProduceBatchesAndConsumeRoundTrips: produce sends lines in
// batches (fewer commits than lines, seen in the metrics), prints a
// summary, takes host:port, reads base64 lines for exact bytes; consume
// gives them back as text and as JSON lines.
func TestE2E_ProduceBatchesAndConsumeRoundTrips(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	e2etest.Expect(t, d.req("PUT", "/v1/topics/lines", map[string]any{"partitions": 1}), 201, "")
	hostPort := strings.TrimPrefix(d.addr, "http://")
	var in strings.Builder
	for i := range 2500 {
		fmt.Fprintf(&in, "line %d\n", i)
	}
	out, errOut, code := cli(t, in.String(), "produce", "--addr", hostPort, "--topic", "lines", "--batch-size", "1000")
	if code != 0 || out != "produced 2500 records to lines/0 in 3 requests, offsets 0..2499\n" {
		t.Fatalf("produce: exit %d, %q %s", code, out, errOut)
	}
	metrics := string(d.req("GET", "/metrics", nil).Body)
	e2etest.ExpectMetric(t, metrics, `narad_http_requests_total{code="200",route="POST /v1/topics/{topic}/partitions/{p}/records"}`, 3)
	e2etest.ExpectMetric(t, metrics, `narad_topic_produced_records_total{topic="lines"}`, 2500)

	raw := []byte{0, 0xff, '\t', 'x', 0xc0}
	out, errOut, code = cli(t, base64.StdEncoding.EncodeToString(raw)+"\n", "produce", "--addr", d.addr, "--topic", "lines", "--base64", "--key", "k", "-v")
	if code != 0 || !strings.Contains(out, "offsets 2500..2500\n") {
		t.Fatalf("produce --base64 -v: exit %d, %q %s", code, out, errOut)
	}
	out, errOut, code = cli(t, "", "consume", "--addr", hostPort, "--topic", "lines", "--from", "2498")
	if code != 0 || out != "0\t2498\t\tline 2498\n0\t2499\t\tline 2499\n0\t2500\tk\t"+string(raw)+"\n" {
		t.Fatalf("consume: exit %d, %q %s", code, out, errOut)
	}
	out, errOut, code = cli(t, "", "consume", "--addr", hostPort, "--topic", "lines", "--from", "2499", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("consume --json: exit %d, %q %s", code, out, errOut)
	}
	var first, second struct {
		Partition     *int    `json:"partition"`
		Offset        int64   `json:"offset"`
		Key           *string `json:"key"`
		Value         string  `json:"value"`
		Encoding      string  `json:"encoding"`
		CommittedAtMs int64   `json:"committed_at_ms"`
	}
	if json.Unmarshal([]byte(lines[0]), &first) != nil || first.Partition == nil || *first.Partition != 0 || first.Offset != 2499 || first.Value != "line 2499" || first.Key != nil || first.CommittedAtMs == 0 {
		t.Fatalf("consume --json line 1: %s", lines[0])
	}
	if json.Unmarshal([]byte(lines[1]), &second) != nil || second.Encoding != "base64" || second.Value != base64.StdEncoding.EncodeToString(raw) ||
		second.Key == nil || *second.Key != base64.StdEncoding.EncodeToString([]byte("k")) {
		t.Fatalf("consume --json line 2: %s", lines[1])
	}
	if _, errOut, code := cli(t, "", "produce", "--topic", "lines", "--addr", "ftp://x"); code != 2 || !strings.Contains(errOut, "host:port") {
		t.Fatalf("a bad --addr: exit %d, %s", code, errOut)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}

// TestE2E_HelpVersionAndCompletion: the root help lists every command
// with its flags; version and --version print the module version and VCS
// revision; the completion scripts parse.
func TestE2E_HelpVersionAndCompletion(t *testing.T) {
	out, _, code := cli(t, "", "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, want := range []string{"serve", "verify", "inspect", "diskcheck", "produce", "consume", "topic", "version", "completion", "--data-dir", "--batch-size", "--tls-cert", "--json", "--strict", "--disk-check-budget"} {
		if !strings.Contains(out, want) {
			t.Fatalf("--help does not list %s:\n%s", want, out)
		}
	}
	v1, _, c1 := cli(t, "", "version")
	v2, _, c2 := cli(t, "", "--version")
	if c1 != 0 || c2 != 0 || v1 != v2 || !strings.HasPrefix(v1, "narad-storaged ") || strings.Contains(v1, " dev") {
		t.Fatalf("version %q (exit %d), --version %q (exit %d)", v1, c1, v2, c2)
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		if rev := strings.TrimSpace(string(head)); !strings.Contains(v1, "revision "+rev) {
			t.Fatalf("version %q does not name the revision %s", v1, rev)
		}
	}
	for _, shell := range []string{"bash", "zsh"} {
		script, _, code := cli(t, "", "completion", shell)
		if code != 0 || !strings.Contains(script, "--batch-size") || !strings.Contains(script, "complete -F") {
			t.Fatalf("completion %s: exit %d\n%s", shell, code, script)
		}
		check := exec.Command("bash", "-n")
		check.Stdin = strings.NewReader(script)
		if out, err := check.CombinedOutput(); err != nil {
			t.Fatalf("completion %s does not parse: %v %s", shell, err, out)
		}
	}
	if _, _, code := cli(t, "", "completion", "fish"); code != 2 {
		t.Fatalf("completion fish: exit %d, want 2", code)
	}
}

// TestE2E_TLSReloadAndCommands: SIGHUP reloads the daemon's certificate
// without a restart; the client commands trust a private CA with
// --tls-ca. (HTTPS only and TLS 1.2 at least are package server's
// TestE2E_TLS.)
func TestE2E_TLSReloadAndCommands(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := e2etest.SelfSignedCert(t, dir, 1)
	d := startDaemon(t, filepath.Join(dir, "data"), "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(d.addr, "https://") {
		t.Fatalf("a TLS daemon listens at %s", d.addr)
	}
	serial := func() int64 { return e2etest.ServedSerial(t, strings.TrimPrefix(d.addr, "https://"), pool) }
	d.http = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	e2etest.Expect(t, d.req("PUT", "/v1/topics/secure", map[string]any{"partitions": 1}), 201, "")
	if serial() != 1 {
		t.Fatal("not the first certificate")
	}

	caFile := filepath.Join(dir, "cert.pem")
	if out, errOut, code := cli(t, "over tls\n", "produce", "--addr", d.addr, "--topic", "secure", "--tls-ca", caFile); code != 0 {
		t.Fatalf("produce over TLS: exit %d, %s %s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "", "consume", "--addr", d.addr, "--topic", "secure", "--tls-ca", caFile); code != 0 || out != "0\t0\t\tover tls\n" {
		t.Fatalf("consume over TLS: exit %d, %q %s", code, out, errOut)
	}

	// A renewed certificate takes effect at SIGHUP, without a restart.
	os.Remove(certFile)
	os.Remove(keyFile)
	e2etest.SelfSignedCert(t, dir, 2)
	d.cmd.Process.Signal(syscall.SIGHUP)
	if !d.waitLog("tls certificate reloaded") {
		t.Fatalf("no reload logged:\n%s", d.log())
	}
	if got := serial(); got != 2 {
		t.Fatalf("after SIGHUP the daemon serves certificate %d, want 2", got)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}

// TestE2E_SystemdNotify: under systemd (NOTIFY_SOCKET) the daemon reports
// READY=1 once it serves, and STOPPING=1 when it begins to stop.
func TestE2E_SystemdNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	d := startDaemon(t, t.TempDir())
	buf := make([]byte, 256)
	n, err := conn.Read(buf) // startDaemon returned at "ready": READY=1 is sent right after
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("first notification %q, %v; want READY=1", buf[:n], err)
	}
	e2etest.Expect(t, d.req("GET", "/readyz", nil), 200, "")
	stopped := make(chan error, 1)
	go func() { stopped <- d.stop(syscall.SIGTERM) }()
	n, err = conn.Read(buf)
	if err != nil || string(buf[:n]) != "STOPPING=1" {
		t.Fatalf("second notification %q, %v; want STOPPING=1", buf[:n], err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}
