package clustertest

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/server"
)

// TestCluster_AMoveOverTLSCarriesTheToken: nodes serving HTTPS with a
// token move a partition between them: the new owner's calls to the old
// one go over TLS (trusting --peer-ca) and carry the cluster's token, or
// the move could not complete; a call without the token is refused.
func TestCluster_AMoveOverTLSCarriesTheToken(t *testing.T) {
	te := startEtcd(t)
	dir := t.TempDir()
	cert, key, pool := e2etest.SelfSignedCert(t, dir, 1)
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
