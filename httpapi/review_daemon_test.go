package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Tests of the daemon's hardening against hostile clients, found by
// review.

// reviewNode is a started node with topic t of one partition, and an API
// over it with opts.
func reviewNode(t testing.TB, opts Options) (*runtime.Node, *Handler) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	ms, err := runtime.OpenLocalMetastore(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	node, err := runtime.New(runtime.Config{DataDir: dir, Metastore: ms, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := node.CreateTopic(ctx, "t", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	opts.MaxBody = max(opts.MaxBody, 1<<20)
	return node, New(node, ms, zap.NewNop(), reg, opts)
}

// tokenServer serves a with the daemon's connection settings: each
// connection's authentication state in its requests' context, OPTIONS *
// to the API.
func tokenServer(t *testing.T, a http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(a)
	srv.Config.ConnContext = ConnContext
	srv.Config.DisableGeneralOptionsHandler = true
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestReview_AnUnauthenticatedOddRequestClosesItsConnection: a daemon
// with a token keeps no connection alive that never authenticated,
// whatever it asked. OPTIONS *, a CONNECT and an uncleaned path were
// answered 400 before the token was looked at, without closing: a client
// without the token held a connection (and its slot under
// --max-connections) for as long as it sent one of them within the idle
// timeout.
func TestReview_AnUnauthenticatedOddRequestClosesItsConnection(t *testing.T) {
	a := New(nil, nil, zap.NewNop(), prometheus.NewRegistry(), Options{Token: []byte("tok"), MaxBody: 1 << 20})
	srv := tokenServer(t, a)
	for _, request := range []string{
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT x:1 HTTP/1.1\r\nHost: x:1\r\n\r\n",
		"GET //v1/topics HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/topics/../topics HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(c, request)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatalf("%q: %v", request, err)
		}
		if resp.StatusCode != http.StatusBadRequest || !resp.Close {
			t.Errorf("%q without the token: %d, close %v; want 400 and the connection closed", request, resp.StatusCode, resp.Close)
		}
	}
}

// TestReview_AnAuthenticatedConnectionStaysAlive: once a request on a
// connection presented the token, the connection is kept alive, for a
// /healthz without the token too; a request without it anywhere else is
// answered 401 and closes it.
func TestReview_AnAuthenticatedConnectionStaysAlive(t *testing.T) {
	a := New(nil, nil, zap.NewNop(), prometheus.NewRegistry(), Options{Token: []byte("tok"), MaxBody: 1 << 20})
	srv := tokenServer(t, a)
	for _, steps := range [][]struct {
		request string
		status  int
		close   bool
	}{
		{{"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200, true}}, // never authenticated
		{
			{"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n\r\n", 200, false},
			{"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200, false},
			{"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400, false},
			{"GET /v1/topics HTTP/1.1\r\nHost: x\r\n\r\n", 401, true},
		},
	} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		for _, step := range steps {
			fmt.Fprint(c, step.request)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%q: %v", step.request, err)
			}
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != step.status || resp.Close != step.close {
				t.Errorf("%q: %d, close %v; want %d, close %v", step.request, resp.StatusCode, resp.Close, step.status, step.close)
			}
		}
		c.Close()
	}
}

// TestReview_ABodyDeadlineStaysWithinTheReadTimeout: the metered body
// moves the connection's read deadline forward as its bytes come, which
// replaces the deadline the server's ReadTimeout set. A client that sent
// 64 MiB but a byte at once, then stalled, held them (and 64 MiB of
// --max-inflight-bytes) for the 17 minutes the rate allowed, past the
// 5-minute read timeout that cut it before; sixteen such held the whole
// budget for an upload of 1 GiB every 17 minutes. And the rate's
// arithmetic overflowed past 9.2 GB held (a larger --max-body-bytes),
// putting the deadline in the past.
func TestReview_ABodyDeadlineStaysWithinTheReadTimeout(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &meteredBody{start: start, grace: bodyGrace, rate: minBodyRate, timeout: 5 * time.Minute, held: 64<<20 - 1}
	if due := m.due(); due.After(start.Add(5 * time.Minute)) {
		t.Errorf("64 MiB held: the body may stall until %v after its start, past the 5-minute read timeout", due.Sub(start))
	}
	m.timeout = 0 // no read timeout
	for _, held := range []int64{10e9, 1 << 62} {
		m.held = held
		if due := m.due(); !due.After(start.Add(bodyGrace)) {
			t.Errorf("%d bytes held: due %v after the start, before the grace ran out", held, due.Sub(start))
		}
	}
}

// TestReview_ACursorLongPollHoldsNoAnswerBudget: a cursor read at the
// high watermark with wait_ms held its max_bytes of --max-answer-bytes
// for its whole wait, reading nothing: sixteen idle cursor polls of
// max_bytes=64 MiB held the 1 GiB budget, and every fetch, cursor read
// and consume of the node was answered 503 busy for up to a minute at a
// time, as slow uploads once did to produce. A fetch's long poll waits
// outside the budget; a cursor read's must too.
func TestReview_ACursorLongPollHoldsNoAnswerBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node, a := reviewNode(t, Options{MaxAnswer: 1 << 20})
		if _, err := node.CreateCursor(context.Background(), "t", "c", runtime.CursorEarliest); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		poll, polled := httptest.NewRecorder(), make(chan struct{})
		go func() {
			defer close(polled)
			a.ServeHTTP(poll, httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/topics/t/cursors/c/partitions/0/records?max_bytes=1048576&wait_ms=60000", nil))
		}()
		defer func() { cancel(); <-polled }() // a failure ends the poll too
		synctest.Wait()                       // the poll waits for a commit
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/topics/t/partitions/0/records?offset=0", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("a fetch while an idle cursor poll waits: %d %s", w.Code, w.Body.String())
		}
		// Woken by a commit while the budget is full, the poll ends with
		// no records, its cursor where it was, as at its deadline.
		if !a.answers.TryAcquire(1 << 20) {
			t.Fatal("the budget is held with no answer in flight")
		}
		if _, err := node.Produce(context.Background(), "t", 0, []partition.Record{{Value: []byte("r")}}); err != nil {
			t.Fatal(err)
		}
		<-polled
		a.answers.Release(1 << 20)
		if w := poll; w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), `{"records":[],"next_offset":0,`) {
			t.Fatalf("a poll woken with the budget full: %d %s", w.Code, w.Body.String())
		}
	})
}

// stalledWriter is a client that stops reading: its first Write blocks
// until resume is closed (stalled is closed then), as a socket's does
// once the client's window is full.
type stalledWriter struct {
	header          http.Header
	stalled, resume chan struct{}
	writes          int
}

func newStalledWriter() *stalledWriter {
	return &stalledWriter{header: http.Header{}, stalled: make(chan struct{}), resume: make(chan struct{})}
}

func (s *stalledWriter) Header() http.Header { return s.header }
func (s *stalledWriter) WriteHeader(int)     {}
func (s *stalledWriter) Write(p []byte) (int, error) {
	if s.writes++; s.writes == 1 {
		close(s.stalled)
		<-s.resume
	}
	return len(p), nil
}

// TestReview_AStalledAnswerHoldsWhatItPins: a fetch's answer is written
// while the read lends its records, so an answer its client stopped
// reading pins the record it is writing (the read's frame buffer) until
// the write timeout. The first record always comes whole, whatever
// max_bytes: a fetch with max_bytes=1 of a 1 MiB record held one byte of
// --max-answer-bytes while it pinned the megabyte, so clients without
// number (--max-connections) could pin records of any size through a
// budget that saw none of it.
func TestReview_AStalledAnswerHoldsWhatItPins(t *testing.T) {
	node, a := reviewNode(t, Options{MaxAnswer: 64 << 20})
	value := strings.Repeat("v", 1<<20)
	if _, err := node.Produce(context.Background(), "t", 0, []partition.Record{{Value: []byte(value)}}); err != nil {
		t.Fatal(err)
	}
	w := newStalledWriter()
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/topics/t/partitions/0/records?offset=0&max_bytes=1", nil))
	}()
	<-w.stalled
	held := a.answerBytes.Load()
	close(w.resume)
	<-done
	if held < int64(len(value)) {
		t.Fatalf("an answer stalled writing a record of %d bytes holds %d bytes of the answer budget", len(value), held)
	}
}

// TestReview_AConsumeLongPollHoldsNoAnswerBudget: a queue consume with
// wait_ms holds its max_bytes of --max-answer-bytes for its whole wait,
// reading nothing (docs/http-api.md says so): sixteen idle consumes of
// max_bytes=64 MiB hold the 1 GiB budget, and every fetch, cursor read
// and consume of the node is answered 503 busy for up to a minute at a
// time.
func TestReview_AConsumeLongPollHoldsNoAnswerBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a := reviewNode(t, Options{MaxAnswer: 1 << 20})
		ctx, cancel := context.WithCancel(context.Background())
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			a.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/topics/t/consume",
				strings.NewReader(`{"max_bytes": 1048576, "wait_ms": 60000}`)))
		}()
		defer func() { cancel(); <-polled }()
		synctest.Wait() // the consume waits for a commit
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/topics/t/partitions/0/records?offset=0", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("a fetch while an idle consume waits: %d %s", w.Code, w.Body.String())
		}
	})
}

// TestReview_AStreamedBinaryAnswerToHTTP10NamesItsBoundary: a binary
// answer larger than the write buffer gives Narad-Next-Offset and
// Narad-High-Watermark as trailers, which HTTP/1.0 has not: an HTTP/1.0
// client gets the records and no boundary at all.
func TestReview_AStreamedBinaryAnswerToHTTP10NamesItsBoundary(t *testing.T) {
	node, a := reviewNode(t, Options{})
	if _, err := node.Produce(context.Background(), "t", 0, []partition.Record{{Value: make([]byte, 100<<10)}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/topics/t/partitions/0/records?offset=0 HTTP/1.0\r\nAccept: %s\r\n\r\n", api.BatchMediaType)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || len(b) < 100<<10 {
		t.Fatalf("%d, %d bytes, %v", resp.StatusCode, len(b), err)
	}
	if resp.Header.Get("Narad-Next-Offset") == "" && resp.Trailer.Get("Narad-Next-Offset") == "" {
		t.Fatalf("an HTTP/1.0 answer of %d bytes without Narad-Next-Offset: header %v, trailer %v", len(b), resp.Header, resp.Trailer)
	}
}
