package server_test

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/server"
)

// TestE2E_TLS: with a certificate and key the node serves HTTPS only,
// TLS 1.2 at least; ReloadTLS takes a renewed certificate without a
// restart. (SIGHUP's reload and the client commands' --tls-ca are
// cmd/narad-storaged's TestE2E_TLSReloadAndCommands.)
func TestE2E_TLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := e2etest.SelfSignedCert(t, dir, 1)
	d := startNode(t, filepath.Join(dir, "data"), func(c *server.Config) { c.TLSCert, c.TLSKey = certFile, keyFile })
	if !strings.HasPrefix(d.addr, "https://") {
		t.Fatalf("a TLS node listens at %s", d.addr)
	}
	serial := func() int64 { return e2etest.ServedSerial(t, d.hostPort(), pool) }
	d.http = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	e2etest.Expect(t, d.req("PUT", "/v1/topics/secure", map[string]any{"partitions": 1}), 201, "")
	if serial() != 1 {
		t.Fatal("not the first certificate")
	}
	old := &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}
	if conn, err := tls.Dial("tcp", d.hostPort(), old); err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
	resp, err := d.own.Get("http://" + d.hostPort() + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP is served on a TLS listener")
		}
	}

	// A renewed certificate takes effect at ReloadTLS, without a restart.
	os.Remove(certFile)
	os.Remove(keyFile)
	e2etest.SelfSignedCert(t, dir, 2)
	d.s.ReloadTLS()
	if !d.waitLog("tls certificate reloaded") {
		t.Fatalf("no reload logged:\n%s", d.log())
	}
	if got := serial(); got != 2 {
		t.Fatalf("after ReloadTLS the node serves certificate %d, want 2", got)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
}
