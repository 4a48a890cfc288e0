package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// TestRecordStream_AnswersAreTheAPITypes: a records answer, streamed as
// its records are read, is byte for byte what encoding/json writes of
// package api's type for it (with <, > and & as they are, as the docs
// say), and holds no field the type lacks: a fetch's in text (a key with
// characters to escape, a record without a key, one that is not UTF-8 and
// goes in base64) and in base64, a cursor read's and a queue consume's.
// The types are the one statement of the answers' shapes; the stream is
// held to them here.
func TestRecordStream_AnswersAreTheAPITypes(t *testing.T) {
	node, a := reviewNode(t, Options{})
	ctx := context.Background()
	records := []partition.Record{{Key: []byte(`k"<&>`), Value: []byte("line\n\x01\\\t")}, {Value: []byte{0xff, 0}}, {Key: []byte("k2"), Value: []byte{}}}
	if _, err := node.Produce(ctx, "t", 0, records); err != nil {
		t.Fatal(err)
	}
	if _, err := node.CreateCursor(ctx, "t", "c", runtime.CursorEarliest); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, target string
		answer         any
	}{
		{"GET", "/v1/topics/t/partitions/0/records?offset=0", &api.FetchAnswer{}},
		{"GET", "/v1/topics/t/partitions/0/records?offset=0&encoding=base64", &api.FetchAnswer{}},
		{"GET", "/v1/topics/t/cursors/c/partitions/0/records?advance=false", &api.CursorReadAnswer{}},
		{"POST", "/v1/topics/t/consume", &api.ConsumeAnswer{}},
	} {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
		if got := strings.Count(w.Body.String(), `"offset":`); w.Code != 200 || got != len(records) {
			t.Fatalf("%s %s: %d, %d records: %s", tc.method, tc.target, w.Code, got, w.Body)
		}
		dec := json.NewDecoder(bytes.NewReader(w.Body.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(tc.answer); err != nil {
			t.Fatalf("%s %s: %v: %s", tc.method, tc.target, err, w.Body)
		}
		var again bytes.Buffer
		enc := json.NewEncoder(&again)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(tc.answer); err != nil {
			t.Fatal(err)
		}
		if again.String() != w.Body.String() {
			t.Errorf("%s %s: streamed\n%s\nthe API's type encodes as\n%s", tc.method, tc.target, w.Body, again.String())
		}
	}
}

// TestFetch_ALargeMaxBytesTakesTheLargeBuffer: a binary fetch of about
// 118 KB of records with max_bytes of 256 KiB or more (the default 1 MiB)
// goes out whole from the large buffer, its length (Content-Length) and
// boundary in its headers; with a smaller max_bytes the same records
// stream from the 64 KiB buffer, their boundary in the trailer.
func TestFetch_ALargeMaxBytesTakesTheLargeBuffer(t *testing.T) {
	node, a := reviewNode(t, Options{})
	recs := make([]partition.Record, 1000)
	for i := range recs {
		recs[i].Value = bytes.Repeat([]byte{'v'}, 100)
	}
	if _, err := node.Produce(context.Background(), "t", 0, recs); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	defer srv.Close()
	for _, c := range []struct {
		query string
		whole bool
	}{{"", true}, {"&max_bytes=262144", true}, {"&max_bytes=262143", false}} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/topics/t/partitions/0/records?offset=0"+c.query, nil)
		req.Header.Set("Accept", api.BatchMediaType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(body) != 1000*api.FetchedSize(0, 100) {
			t.Fatalf("%q: status %d, %d bytes, %v", c.query, resp.StatusCode, len(body), err)
		}
		whole := resp.ContentLength == int64(len(body)) && resp.Header.Get(api.HeaderNextOffset) == "1000"
		streamed := resp.ContentLength == -1 && resp.Trailer.Get(api.HeaderNextOffset) == "1000"
		if whole != c.whole || whole == streamed {
			t.Fatalf("%q: Content-Length %d, header %q, trailer %q; want whole %v", c.query, resp.ContentLength, resp.Header.Get(api.HeaderNextOffset), resp.Trailer.Get(api.HeaderNextOffset), c.whole)
		}
	}
}
