package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// TestMeteredBody_BoundsTheProduceBytesHeldAtOnce: produce bodies are
// taken against --max-inflight-bytes as their bytes are read, whatever
// they declare; a body whose next bytes do not fit is cut (503 busy,
// Retry-After, the connection closed), and fits again once the bytes
// ahead of it are released.
func TestMeteredBody_BoundsTheProduceBytesHeldAtOnce(t *testing.T) {
	a := New(nil, nil, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20, MaxInflight: 100})
	meter := func(body string) *meteredBody {
		r := httptest.NewRequest("POST", "/v1/topics/t/partitions/0/records", strings.NewReader(body))
		r.ContentLength = 1 << 20 // declared: never counted
		return a.meterBody(httptest.NewRecorder(), r)
	}
	first := meter(strings.Repeat("a", 80))
	if b, err := io.ReadAll(first); err != nil || len(b) != 80 || first.held != 80 {
		t.Fatalf("80 bytes of 100: %d read, %d held, %v", len(b), first.held, err)
	}
	second := meter(strings.Repeat("b", 30))
	if _, err := io.ReadAll(second); err != errBodyBusy {
		t.Fatalf("30 more bytes over a budget of 100 holding 80: %v", err)
	}
	w := httptest.NewRecorder()
	if !second.refused(w) || w.Code != 503 || w.Header().Get("Retry-After") != "1" || w.Header().Get("Connection") != "close" || !strings.Contains(w.Body.String(), `"busy"`) {
		t.Fatalf("refusal: %d %q, headers %v", w.Code, w.Body.String(), w.Header())
	}
	second.release()
	first.release()
	third := meter(strings.Repeat("c", 100))
	if b, err := io.ReadAll(third); err != nil || len(b) != 100 {
		t.Fatalf("100 bytes once the budget is free: %d, %v", len(b), err)
	}
	third.release()
}

// TestMeteredBody_ASlowBodyIsCut: a body that falls behind the minimum
// rate after the grace period is cut with 408 body_too_slow and its
// connection closed, its bytes given back; a body that keeps up is read
// whole.
func TestMeteredBody_ASlowBodyIsCut(t *testing.T) {
	a := New(nil, nil, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20, MaxInflight: 1 << 20,
		bodyGrace: 50 * time.Millisecond, minBodyRate: 1 << 20})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := a.meterBody(w, r)
		defer body.release()
		io.Copy(io.Discard, body)
		if !body.refused(w) {
			w.WriteHeader(200)
		}
	}))
	defer srv.Close()
	if resp, err := http.Post(srv.URL, "text/plain", strings.NewReader(strings.Repeat("x", 1000))); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a body that keeps up: %v, %v", resp, err)
	}
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Declares a megabyte, sends one byte, and nothing more: the answer
	// comes when the grace runs out, not at the server's read timeout.
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\nx")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close || !strings.Contains(string(b), "body_too_slow") {
		t.Fatalf("a slow body: %d close %v %s", resp.StatusCode, resp.Close, b)
	}
	if a.inflight.TryAcquire(1 << 20) {
		a.inflight.Release(1 << 20)
	} else {
		t.Fatal("the cut body's bytes were not given back")
	}
}
