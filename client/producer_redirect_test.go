package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/server"
)

// TestProducer_FollowsA421ToTheOwnerAndStaysThere: a node that does not
// own the topic's partitions answers 421 naming the owner (a real node);
// each partition's first batch is sent again there, and its later
// batches go straight to it.
func TestProducer_FollowsA421ToTheOwnerAndStaysThere(t *testing.T) {
	owner := startRealNode(t, nil, Options{})
	owner.topic(t, "moved", 2)
	var mu sync.Mutex
	misdirected := 0
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/partitions/") {
			owner.s.Handler().ServeHTTP(w, r) // topic calls: any node answers
			return
		}
		mu.Lock()
		misdirected++
		mu.Unlock()
		w.WriteHeader(http.StatusMisdirectedRequest)
		fmt.Fprintf(w, `{"error":{"code":"not_owner","message":"m"},"owner":{"node_id":"b","addr":%q}}`, owner.srv.URL)
	}))
	defer other.Close()
	c, err := New(other.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.http.CloseIdleConnections()
	p := newProducer(t, c, "moved", ProducerOptions{Linger: time.Hour})
	var rs results
	for round := range 2 {
		for i := range 20 {
			produce(t, p, &rs, fmt.Sprint("k", i), fmt.Sprint(round, "/", i))
		}
		if err := p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := misdirected
		mu.Unlock()
		if got != 2 {
			t.Fatalf("after round %d the other node had %d produce requests; want 2, one a partition, then none", round, got)
		}
	}
	results, _ := rs.take()
	for _, r := range results {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if n := len(owner.records(t, "moved", 0)) + len(owner.records(t, "moved", 1)); n != 40 || len(results) != 40 {
		t.Fatalf("the owner holds %d records, %d results; want 40", n, len(results))
	}
}

// TestProducer_LingersAndKeepsOneInFlightOverTheCallersTransport: a
// batch is sent its linger after its first record (the fake clock of a
// bubble says exactly when), and over a transport of the caller's
// (Options.HTTPClient), which may reorder concurrent requests, a
// partition has one request in flight whatever MaxInFlight says.
func TestProducer_LingersAndKeepsOneInFlightOverTheCallersTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sent []time.Time
		var sizes []int
		inFlight, most, next := 0, 0, int64(0)
		c := fakeClient(t, func(r *http.Request) *http.Response {
			if r.Method == http.MethodGet {
				return answer(200, `{"name":"t","partitions":[{"partition":0}]}`)
			}
			records := countBatch(t, r.Body)
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			sent, sizes = append(sent, time.Now()), append(sizes, records)
			base := next
			next += int64(records)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond) // the commit
			mu.Lock()
			inFlight--
			mu.Unlock()
			return answer(200, fmt.Sprintf(`{"base_offset":%d,"count":%d,"high_watermark":%d}`, base, records, base+int64(records)))
		}, Options{})
		ctx := context.Background()
		start := time.Now()
		p, err := c.NewProducer(ctx, "t", ProducerOptions{Linger: 20 * time.Millisecond, BatchRecords: 5, MaxInFlight: 4})
		if err != nil {
			t.Fatal(err)
		}
		var rs results
		sentAt := func() []time.Time {
			mu.Lock()
			defer mu.Unlock()
			return append([]time.Time(nil), sent...)
		}
		produce(t, p, &rs, "", "first")
		synctest.Wait()
		if got := sentAt(); len(got) != 0 {
			t.Fatal("a batch was sent before its linger")
		}
		time.Sleep(30 * time.Millisecond) // past the linger and the commit
		synctest.Wait()
		if got := sentAt(); len(got) != 1 || got[0].Sub(start) != 20*time.Millisecond {
			t.Fatalf("sent at %v; want once, 20 ms after the record", got)
		}
		for i := range 20 {
			produce(t, p, &rs, "", fmt.Sprint(i))
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		got, _ := rs.take()
		for i, r := range got {
			if r.Err != nil || r.Offset != int64(i) {
				t.Fatalf("result %d: %+v", i, r)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 21 || most != 1 || fmt.Sprint(sizes) != "[1 5 5 5 5]" {
			t.Fatalf("%d results; requests of %v records, at most %d at once; want 21, [1 5 5 5 5], 1", len(got), sizes, most)
		}
	})
}

// countBatch counts the records of a binary batch body.
func countBatch(t *testing.T, body io.Reader) int {
	b, err := io.ReadAll(body)
	if err != nil {
		t.Error(err)
	}
	br := bufio.NewReader(bytes.NewReader(b))
	n := 0
	for {
		kl, err := binary.ReadUvarint(br)
		if err != nil {
			return n
		}
		br.Discard(int(kl))
		vl, _ := binary.ReadUvarint(br)
		br.Discard(int(vl))
		n++
	}
}

// TestProducer_OverTLSWithAToken: the producer's own connections speak
// TLS (the client's TLSConfig, HTTP/1.1 offered alone) and carry the
// token; a wrong token fails every record with the 401.
func TestProducer_OverTLSWithAToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.AuthTokenFile = filepath.Join(dir, "data"), "", tokenFile
	cfg.MinFreeBytes, cfg.MinFreeInodes = 0, 0
	ctx := context.Background()
	s, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.EnableHTTP2 = true // the producer must still get HTTP/1.1
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	for _, token := range []string{"s3cret", "wrong"} {
		c, err := New(srv.URL, Options{Token: token, TLSConfig: &tls.Config{RootCAs: pool}})
		if err != nil {
			t.Fatal(err)
		}
		if token == "s3cret" {
			if _, _, err := c.CreateTopic(ctx, "secure", 1, Retention{}); err != nil {
				t.Fatal(err)
			}
		}
		p, err := c.NewProducer(ctx, "secure", ProducerOptions{})
		if token == "wrong" {
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("a producer with a wrong token: %v", err)
			}
			// Past the describe (a producer made with the right token
			// whose token then changes cannot be made): the produce
			// itself refused.
			good, _ := New(srv.URL, Options{Token: "s3cret", TLSConfig: &tls.Config{RootCAs: pool}})
			p = newProducer(t, good, "secure", ProducerOptions{})
			p.c = c
			defer good.http.CloseIdleConnections()
		} else if err != nil {
			t.Fatal(err)
		}
		var rs results
		for i := range 10 {
			produce(t, p, &rs, "", fmt.Sprint(i))
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		got, _ := rs.take()
		for _, r := range got {
			if (token == "s3cret") != (r.Err == nil) || token == "wrong" && !errors.Is(r.Err, ErrUnauthorized) {
				t.Fatalf("token %s: %+v", token, r)
			}
		}
		c.http.CloseIdleConnections()
	}
}
