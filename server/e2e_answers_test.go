package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/server"
)

// Tests of records answers streamed and bounded (docs/http-api.md,
// "Fetch" and "Answer budget"): issue "a daemon no client can take
// down", items 1 and 2. (The peak memory of four large fetches, and the
// descriptors unauthenticated connections may take under an open-file
// limit, are the process's: cmd/narad-storaged's tests measure them.)

// TestE2E_MaxBytesBoundsTheAnswerOnTheWire: a JSON fetch's records take at
// most max_bytes of the answer as it is sent (escapes and base64
// included), but the first record, which always comes.
func TestE2E_MaxBytesBoundsTheAnswerOnTheWire(t *testing.T) {
	d := startNode(t, t.TempDir())
	e2etest.Expect(t, d.req("PUT", "/v1/topics/w", map[string]any{"partitions": 1}), 201, "")
	e2etest.ProduceLarge(t, d.api(), "w", 20, 1000, `\"`) // 1,000 quotes, 2,000 bytes as JSON
	for _, c := range []struct {
		query   string
		records int
	}{
		{"max_bytes=10000", 4},
		{"max_bytes=10000&encoding=base64", 7},
		{"max_bytes=10", 1},
	} {
		r := d.req("GET", "/v1/topics/w/partitions/0/records?offset=0&"+c.query, nil)
		e2etest.Expect(t, r, 200, "")
		var f struct {
			Records    []json.RawMessage `json:"records"`
			NextOffset int64             `json:"next_offset"`
		}
		r.JSON(t, &f)
		size := 0
		for i, rec := range f.Records {
			size += len(rec)
			if i > 0 {
				size++ // the comma
			}
		}
		if len(f.Records) != c.records || f.NextOffset != int64(c.records) {
			t.Errorf("%s: %d records (next %d), %d bytes of them; want %d", c.query, len(f.Records), f.NextOffset, size, c.records)
		}
	}
}

// TestE2E_AnAnswerASlowReaderHoldsTakesItsBudget: a fetch whose reader
// stops reading holds its max_bytes of --max-answer-bytes while the node
// waits to write the rest; a fetch that does not fit is answered 503 busy
// (Retry-After) meanwhile, and the gauge shows what is held.
func TestE2E_AnAnswerASlowReaderHoldsTakesItsBudget(t *testing.T) {
	d := startNode(t, t.TempDir(), func(c *server.Config) {
		c.MaxAnswerBytes = e2etest.MaxFetchBytes
		c.MaxBodyBytes = 4 << 20
	})
	e2etest.Expect(t, d.req("PUT", "/v1/topics/s", map[string]any{"partitions": 1}), 201, "")
	e2etest.ProduceLarge(t, d.api(), "s", 16, 1<<20, "x")
	c, err := net.Dial("tcp", d.hostPort())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/topics/s/partitions/0/records?offset=0&max_bytes=%d HTTP/1.1\r\nHost: x\r\n\r\n", e2etest.MaxFetchBytes)
	resp, err := http.ReadResponse(bufio.NewReader(io.LimitReader(c, 1<<16)), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the held fetch: %v, %v", resp, err)
	}
	// Its answer has begun (the header came with its first 64 KiB) and
	// is not read on: it holds its budget.
	r := d.req("GET", "/v1/topics/s/partitions/0/records?offset=0&max_bytes=1000", nil)
	e2etest.Expect(t, r, 503, "busy")
	if r.Header.Get("Retry-After") == "" {
		t.Error("503 busy without Retry-After")
	}
	e2etest.ExpectMetric(t, string(d.req("GET", "/metrics", nil).Body), "narad_http_answer_bytes_in_flight", e2etest.MaxFetchBytes)
	c.Close() // the held answer's write fails; its budget comes back
	// The client retries busy, as the 503 asks. Its answer is one record
	// of 1 MiB (the first always comes), streamed: its boundary comes in
	// the trailer.
	cl := d.client(client.Options{Retries: 10})
	f, err := cl.Fetch(context.Background(), "s", 0, 0, client.FetchOptions{MaxBytes: 1000})
	if err != nil || len(f.Records) != 1 || len(f.Records[0].Value) != 1<<20 || f.NextOffset != 1 || f.HighWatermark != 16 || len(f.Incarnation) != 16 {
		t.Fatalf("after the held answer ended: %d records, next %d, hwm %d, incarnation %q, %v", len(f.Records), f.NextOffset, f.HighWatermark, f.Incarnation, err)
	}
}

// TestE2E_SlowUploadsHoldOnlyWhatTheySent: the review's case. Sixteen
// connections each declaring a 64 MiB body and sending one byte hold one
// byte each of --max-inflight-bytes, not 64 MiB (which took the whole
// 1 GiB budget and answered every other produce 503 busy): a produce from
// another client is answered 200 meanwhile. Each slow upload has been
// admitted when the test produces (the node answered its Expect:
// 100-continue, which it does when the handler first reads the body).
func TestE2E_SlowUploadsHoldOnlyWhatTheySent(t *testing.T) {
	d := startNode(t, t.TempDir())
	e2etest.Expect(t, d.req("PUT", "/v1/topics/up", map[string]any{"partitions": 1}), 201, "")
	for range 16 {
		c, err := net.Dial("tcp", d.hostPort())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/topics/up/partitions/0/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", e2etest.MaxFetchBytes)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
			t.Fatalf("no 100 Continue: %q, %v", line, err)
		}
		c.Write([]byte("{"))
	}
	e2etest.Expect(t, d.req("POST", "/v1/topics/up/partitions/0/records", `{"records":[{"value":"meanwhile"}]}`), 200, "")
}
