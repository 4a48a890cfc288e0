package httpapi

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

// TestDecodeJSON_ExactFieldNames: a field is one of the body's by its
// exact name, given once (found by review: encoding/json matched
// "PARTITIONS" and "partitionſ", and let a repeated field win, so an ack
// of [1, 2] then [3] dropped two offsets).
func TestDecodeJSON_ExactFieldNames(t *testing.T) {
	for _, body := range []string{
		`{"partitions": 1, "partitions": 4}`,
		`{"PARTITIONS": 4}`,
		`{"partitionſ": 4}`,
		`{"partitions": 4, "Retention_MS": 5}`,
		`[{"partitions": 4}]`,
	} {
		var tb api.TopicRequest
		if err := decodeJSON(httptest.NewRequest("PUT", "/v1/topics/t", strings.NewReader(body)), &tb); err == nil {
			t.Errorf("%s: accepted; want refused", body)
		}
	}
	var ack api.AckRequest
	if err := decodeJSON(httptest.NewRequest("POST", "/acks", strings.NewReader(`{"offsets": [1, 2], "offsets": [3]}`)), &ack); err == nil {
		t.Errorf("a repeated offsets field was taken as %v", ack.Offsets)
	}
	var tb api.TopicRequest
	if err := decodeJSON(httptest.NewRequest("PUT", "/v1/topics/t", strings.NewReader(` {"retention_ms": 5, "partitions": 4} `)), &tb); err != nil ||
		*tb.Partitions != 4 || *tb.RetentionMs != 5 {
		t.Fatalf("an exact body: %+v, %v", tb, err)
	}
}

// TestRecordBytes_Base64IsStrict: one base64 text per byte string (found
// by review: non-zero padding bits and line breaks were taken).
func TestRecordBytes_Base64IsStrict(t *testing.T) {
	for _, body := range []string{
		`{"records":[{"value":"QR=="}]}`,
		`{"records":[{"value":"QU\nJD"}]}`,
		`{"records":[{"value":"QUJD\r\n"}]}`,
		`{"records":[{"value":"QUJD="}]}`,
	} {
		if recs, err := decodeJSONRecords(strings.NewReader(body), true); err == nil {
			t.Errorf("%s: accepted as %q; want refused", body, recs[0].Value)
		}
	}
	recs, err := decodeJSONRecords(strings.NewReader(`{"records":[{"value":"QUJD"}]}`), true)
	if err != nil || string(recs[0].Value) != "ABC" {
		t.Fatalf("QUJD: %v %v", recs, err)
	}
}

// TestAPI_TooLargeBodyAnsweredAtOnce: a body over the cap is answered 413
// and the connection closed at once, not after the server has read on
// (found by review: the metrics wrapper hid the server's writer from the
// cap). The deadline only bounds a hang.
func TestAPI_TooLargeBodyAnsweredAtOnce(t *testing.T) {
	a := New(nil, nil, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1024})
	srv := httptest.NewServer(a)
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	chunk := `{"records": [{"value": "` + strings.Repeat("x", 4096) + `"}]}`
	fmt.Fprintf(c, "POST /v1/topics/orders/partitions/0/records HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(chunk), chunk)
	c.SetReadDeadline(time.Now().Add(time.Minute)) // the body is not finished: the answer must not wait for it
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body over the cap: %v", err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Fatalf("status %d, close %v; want 413 and Connection: close", resp.StatusCode, resp.Close)
	}
}

// TestAPI_RequestsNoRouteTakesAreJSONAndUnmatched: a request target that
// is not a path ("*", a CONNECT's host:port) is answered in JSON and
// counted as route="unmatched", never "unauthorized" (found by review:
// scanners' probes inflated the series an auth alert watches).
func TestAPI_RequestsNoRouteTakesAreJSONAndUnmatched(t *testing.T) {
	a := New(nil, nil, zap.NewNop(), prometheus.NewRegistry(), Options{MaxBody: 1 << 20})
	srv := httptest.NewServer(a)
	defer srv.Close()
	for _, req := range []string{
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
		"GET * HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(req))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%q: %d %s", strings.SplitN(req, "\r\n", 2)[0], resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if v := testutil.ToFloat64(a.metrics.requests.WithLabelValues("unmatched", "400")); v != 2 {
		t.Fatalf(`narad_http_requests_total{route="unmatched",code="400"} = %v, want 2`, v)
	}
	if v := testutil.ToFloat64(a.metrics.requests.WithLabelValues("unauthorized", "400")); v != 0 {
		t.Fatalf("probes counted as unauthorized: %v", v)
	}
}
