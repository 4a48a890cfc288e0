package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/server"
)

// testCert writes a self-signed certificate for 127.0.0.1 (serial
// serial) and its key into dir, and returns their paths and a pool that
// trusts it.
func testCert(t *testing.T, dir string, serial int64) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "narad test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestE2E_TLS: with a certificate and key the node serves HTTPS only,
// TLS 1.2 at least; ReloadTLS takes a renewed certificate without a
// restart. (SIGHUP's reload and the client commands' --tls-ca are
// cmd/narad-storaged's TestE2E_TLSReloadAndCommands.)
func TestE2E_TLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := testCert(t, dir, 1)
	d := startNode(t, filepath.Join(dir, "data"), func(c *server.Config) { c.TLSCert, c.TLSKey = certFile, keyFile })
	if !strings.HasPrefix(d.addr, "https://") {
		t.Fatalf("a TLS node listens at %s", d.addr)
	}
	serial := func() int64 {
		conn, err := tls.Dial("tcp", d.hostPort(), &tls.Config{RootCAs: pool, InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	d.http = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	expect(t, d.req("PUT", "/v1/topics/secure", map[string]any{"partitions": 1}), 201, "")
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
	testCert(t, dir, 2)
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
