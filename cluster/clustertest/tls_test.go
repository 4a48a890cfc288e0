package clustertest

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

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/server"
)

// selfSigned writes a self-signed certificate for 127.0.0.1, its own CA,
// and its key into dir, and returns their paths and a pool trusting it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "narad cluster test"},
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
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestCluster_AMoveOverTLSCarriesTheToken: nodes serving HTTPS with a
// token move a partition between them: the new owner's calls to the old
// one go over TLS (trusting --peer-ca) and carry the cluster's token, or
// the move could not complete; a call without the token is refused.
func TestCluster_AMoveOverTLSCarriesTheToken(t *testing.T) {
	te := startEtcd(t)
	dir := t.TempDir()
	cert, key, pool := selfSigned(t, dir)
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secure := func(c *server.Config) {
		c.TLSCert, c.TLSKey, c.AuthTokenFile, c.PeerCA = cert, key, token, cert
	}
	a := startNode(t, te, "a", filepath.Join(dir, "a"), secure)
	b := startNode(t, te, "b", filepath.Join(dir, "b"), secure)
	if !strings.HasPrefix(a.addr, "https://") || !strings.HasPrefix(b.addr, "https://") {
		t.Fatalf("nodes at %s and %s; want https", a.addr, b.addr)
	}
	c, err := client.New(a.addr, client.Options{Token: "s3cret", TLSConfig: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	if _, _, err := c.CreateTopic(bg, "orders", 2, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owner := owners(t, watch, heard, "orders", 2)
	for p := range 2 {
		if _, err := c.Produce(bg, "orders", p, []client.Record{{Value: []byte("one")}, {Value: []byte("two")}}); err != nil {
			t.Fatal(err)
		}
	}
	to := "a"
	if owner[0] == "a" {
		to = "b"
	}
	if _, err := c.MovePartition(bg, "orders", 0, to); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "the move over TLS to complete", func() bool {
		o, _ := watch.Owner("orders", 0)
		return o == to && len(watch.Moves()) == 0
	})
	got, err := c.Fetch(bg, "orders", 0, 0, client.FetchOptions{})
	if err != nil || len(got.Records) != 2 || string(got.Records[1].Value) != "two" {
		t.Fatalf("after the move: %+v, %v", got, err)
	}
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := plain.Post(a.addr+"/v1/internal/moves/x/freeze", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	plain.CloseIdleConnections()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an internal call without the token: %d, want 401", resp.StatusCode)
	}
}
