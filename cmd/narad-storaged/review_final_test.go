package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	node, a := reviewNode(t, apiOptions{})
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
	var got struct {
		Records []struct {
			Offset int64  `json:"offset"`
			Value  string `json:"value"`
		} `json:"records"`
		NextOffset int64 `json:"next_offset"`
	}
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
