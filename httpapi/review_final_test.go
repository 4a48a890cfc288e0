package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
)

// Tests of the streamed answer's reads (readInto), found by review.

// TestReview_AFirstRecordThatFillsTheBufferIsReadFromTheFetchOffset: a
// JSON fetch's first record too large for what is left of the buffer
// after the answer's opening, yet no larger than the buffer, is read
// again after a flush from the last record written plus one: with none
// written, from offset 0, not from the fetch's offset, so the answer
// held another record than the one asked for.
func TestReview_AFirstRecordThatFillsTheBufferIsReadFromTheFetchOffset(t *testing.T) {
	node, a := reviewNode(t, Options{})
	ctx := context.Background()
	if _, err := node.Produce(ctx, "t", 0, []partition.Record{{Value: []byte("first")}}); err != nil {
		t.Fatal(err)
	}
	// Record 1's encoding as a first record: its fixed part (13 digits of
	// milliseconds) and a value that takes it within the buffer's size but
	// past what the answer's opening leaves of it.
	s := newRecordStream(httptest.NewRecorder(), false, false, 1<<20)
	fixed := s.size(partition.ReadRecord{Offset: 1, CommittedAtUnixMs: time.Now().UnixMilli()}, false)
	room := s.bw.Available()
	s.release()
	value := strings.Repeat("v", room+1-fixed)
	if _, err := node.Produce(ctx, "t", 0, []partition.Record{{Value: []byte(value)}}); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/topics/t/partitions/0/records?offset=1&max_records=1", nil))
	var got api.FetchAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("%d %v: %.200s", w.Code, err, w.Body.String())
	}
	if len(got.Records) != 1 || got.Records[0].Offset != 1 || got.Records[0].Value != value || got.NextOffset != 2 {
		var offsets []int64
		for _, r := range got.Records {
			offsets = append(offsets, r.Offset)
		}
		t.Fatalf("a fetch at offset 1 of one record answered the records at %v, next_offset %d", offsets, got.NextOffset)
	}
}

// bufferPerStallClient is a client that accepts a buffer's worth of an
// answer within answerStall, and no more: a single write to it of more
// than that meets its write deadline (os.ErrDeadlineExceeded), as a
// socket's does.
type bufferPerStallClient struct {
	header http.Header
	body   bytes.Buffer
}

func (c *bufferPerStallClient) Header() http.Header              { return c.header }
func (c *bufferPerStallClient) WriteHeader(int)                  {}
func (c *bufferPerStallClient) SetWriteDeadline(time.Time) error { return nil }
func (c *bufferPerStallClient) Write(p []byte) (int, error) {
	if len(p) > answerBufferSize {
		return 0, os.ErrDeadlineExceeded
	}
	return c.body.Write(p)
}

// TestReview_ARecordLargerThanTheBufferGetsAStallPerBuffer: answerStall
// bounds one write to the client, meant to be at most a buffer's worth,
// but a record larger than the buffer (read again as a copy) went out in
// one write: a client had answerStall for the whole record, so one that
// takes a 64 MiB record at less than 6.4 MB/s could never fetch it, and
// met the cut at every retry.
func TestReview_ARecordLargerThanTheBufferGetsAStallPerBuffer(t *testing.T) {
	node, a := reviewNode(t, Options{})
	value := strings.Repeat("v", 4*answerBufferSize)
	if _, err := node.Produce(context.Background(), "t", 0, []partition.Record{{Value: []byte(value)}}); err != nil {
		t.Fatal(err)
	}
	for _, accept := range []string{"application/json", api.BatchMediaType} {
		c := &bufferPerStallClient{header: http.Header{}}
		r := httptest.NewRequest(http.MethodGet, "/v1/topics/t/partitions/0/records?offset=0", nil)
		r.Header.Set("Accept", accept)
		a.ServeHTTP(c, r)
		if !bytes.Contains(c.body.Bytes(), []byte(value)) {
			t.Fatalf("%s: a client that takes a buffer's worth per answerStall got %d bytes of an answer of a %d-byte record",
				accept, c.body.Len(), len(value))
		}
	}
}

// TestReview_ARecordWhoseEncodingPassesTheBudgetIsServed: a first record
// larger than the buffer takes its bytes past max_bytes from the answer
// budget, and one whose encoding is larger than the whole budget can
// never get them: under --max-answer-bytes at its least (64 MiB), an
// 11 MiB record of control bytes (JSON escapes each in six) was answered
// 503 busy, retry, at every retry, for ever: a consumer stuck at it.
func TestReview_ARecordWhoseEncodingPassesTheBudgetIsServed(t *testing.T) {
	node, a := reviewNode(t, Options{MaxAnswer: maxFetchBytes})
	value := bytes.Repeat([]byte{1}, maxFetchBytes/6+1)
	if _, err := node.Produce(context.Background(), "t", 0, []partition.Record{{Value: value}}); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/topics/t/partitions/0/records?offset=0&max_bytes=1", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("a fetch of a record of %d bytes with nothing else in flight: %d %.200s", len(value), w.Code, w.Body.String())
	}
}

// TestReview_ARecordWhoseEncodingPassesTheBudgetIsServedAtTheLargestMaxBytes:
// as above, with max_bytes the whole budget: the answer already holds
// all of it, and takes nothing more.
func TestReview_ARecordWhoseEncodingPassesTheBudgetIsServedAtTheLargestMaxBytes(t *testing.T) {
	node, a := reviewNode(t, Options{MaxAnswer: 1 << 20})
	value := bytes.Repeat([]byte{1}, 1<<20/6+1)
	if _, err := node.Produce(context.Background(), "t", 0, []partition.Record{{Value: value}}); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/v1/topics/t/partitions/0/records?offset=0&max_bytes=%d", 1<<20), nil))
	if w.Code != http.StatusOK {
		t.Fatalf("a fetch of a record of %d bytes with nothing else in flight: %d %.200s", len(value), w.Code, w.Body.String())
	}
}
