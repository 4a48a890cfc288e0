package main

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// TestAdmitBody_BoundsTheProduceBytesHeldAtOnce: produce bodies are taken
// against --max-inflight-bytes at their Content-Length (the body cap when
// they have none); one that does not fit is answered 503 busy with
// Retry-After, and fits again once the bytes ahead of it are released.
func TestAdmitBody_BoundsTheProduceBytesHeldAtOnce(t *testing.T) {
	a := newAPI(nil, nil, zap.NewNop(), prometheus.NewRegistry(), apiOptions{maxBody: 100, maxInflight: 100})
	admit := func(length int64) (func(), *httptest.ResponseRecorder) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v1/topics/t/partitions/0/records", strings.NewReader(""))
		r.ContentLength = length
		release, ok := a.admitBody(w, r)
		if !ok {
			return nil, w
		}
		return release, w
	}
	first, _ := admit(80)
	if first == nil {
		t.Fatal("80 bytes of 100 refused")
	}
	if release, w := admit(30); release != nil {
		t.Fatal("30 more bytes taken over a budget of 100 holding 80")
	} else if b, _ := io.ReadAll(w.Body); w.Code != 503 || w.Header().Get("Retry-After") != "1" || !strings.Contains(string(b), `"busy"`) {
		t.Fatalf("refusal: %d %q, Retry-After %q", w.Code, b, w.Header().Get("Retry-After"))
	}
	second, _ := admit(20)
	if second == nil {
		t.Fatal("20 bytes refused with 80 of 100 taken")
	}
	first()
	second()
	unknown, _ := admit(-1) // chunked: counted at the body cap
	if unknown == nil {
		t.Fatal("a body of unknown length refused by an empty budget")
	}
	if release, _ := admit(1); release != nil {
		t.Fatal("a body taken while one of unknown length holds the whole budget")
	}
	unknown()
}

// TestConfig_InflightBudgetHoldsTheLargestBody: a budget under the body
// cap could never take the largest body, and is refused at start; so is a
// shutdown timeout that would give a graceful stop no time (found by
// review).
func TestConfig_InflightBudgetHoldsTheLargestBody(t *testing.T) {
	if _, err := parseServeFlags([]string{"--max-body-bytes", "1000", "--max-inflight-bytes", "999"}, io.Discard); err == nil || !strings.Contains(err.Error(), "max-inflight-bytes") {
		t.Fatalf("a budget under the body cap: %v", err)
	}
	if _, err := parseServeFlags([]string{"--shutdown-timeout", "0s"}, io.Discard); err == nil || !strings.Contains(err.Error(), "shutdown-timeout") {
		t.Fatalf("a shutdown timeout of 0: %v", err)
	}
	for _, ok := range [][]string{{"--max-body-bytes", "1000", "--max-inflight-bytes", "1000"}, {"--max-inflight-bytes", "0"}} {
		if _, err := parseServeFlags(ok, io.Discard); err != nil {
			t.Fatalf("%v: %v", ok, err)
		}
	}
}
