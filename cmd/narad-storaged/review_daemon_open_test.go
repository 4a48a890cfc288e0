package main

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

	"github.com/narad-io/storage/partition"
)

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
	node, a := reviewNode(t, apiOptions{maxAnswer: 64 << 20})
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
		_, a := reviewNode(t, apiOptions{maxAnswer: 1 << 20})
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
	node, a := reviewNode(t, apiOptions{})
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
	fmt.Fprintf(c, "GET /v1/topics/t/partitions/0/records?offset=0 HTTP/1.0\r\nAccept: %s\r\n\r\n", batchContentType)
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
