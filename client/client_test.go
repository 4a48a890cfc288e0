package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/api"
)

// fakeDaemon answers requests from a function, without a network.
type fakeDaemon func(*http.Request) *http.Response

func (f fakeDaemon) RoundTrip(r *http.Request) (*http.Response, error) { return f(r), nil }

func answer(status int, body string, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

func fakeClient(t *testing.T, f fakeDaemon, opts Options) *Client {
	t.Helper()
	opts.HTTPClient = &http.Client{Transport: f}
	c, err := New("127.0.0.1:7480", opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProduce_RetriesCommitFailedWithBackoff: a 503 commit_failed left
// nothing behind, so the client sends the batch again, after a backoff
// (Retry-After when given), up to Retries times; other errors are
// not retried.
func TestProduce_RetriesCommitFailedWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Time
		var bodies []string
		failures := 2
		c := fakeClient(t, func(r *http.Request) *http.Response {
			b, _ := io.ReadAll(r.Body)
			sent, bodies = append(sent, time.Now()), append(bodies, string(b))
			if len(sent) <= failures {
				return answer(503, `{"error":{"code":"commit_failed","message":"retry"}}`, "Retry-After", "1")
			}
			return answer(200, `{"base_offset":7,"count":1,"high_watermark":8}`)
		}, Options{})
		res, err := c.Produce(context.Background(), "t", 0, []Record{{Value: []byte("v")}})
		if err != nil || res.BaseOffset != 7 || res.HighWatermark != 8 {
			t.Fatalf("produce: %+v, %v", res, err)
		}
		if len(sent) != 3 || sent[1].Sub(sent[0]) != time.Second || bodies[0] != bodies[2] {
			t.Fatalf("%d sends at %v, bodies %q; want 3, a second apart (Retry-After), the same body", len(sent), sent, bodies)
		}

		sent, failures = nil, 100
		_, err = c.Produce(context.Background(), "t", 0, []Record{{Value: []byte("v")}})
		if !errors.Is(err, ErrCommitFailed) || len(sent) != 4 {
			t.Fatalf("always failing: %v after %d sends; want ErrCommitFailed after 1 + 3 retries", err, len(sent))
		}
	})
}

// TestClient_RetriesBusyForEveryCall: a 503 busy says the node did
// nothing (no open-log slot or descriptor free), so any call is sent
// again after the server's Retry-After, up to Retries times.
func TestClient_RetriesBusyForEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Time
		failures := 1
		c := fakeClient(t, func(r *http.Request) *http.Response {
			sent = append(sent, time.Now())
			if len(sent) <= failures {
				return answer(503, `{"error":{"code":"busy","message":"retry"}}`, "Retry-After", "1")
			}
			return answer(200, `{"frontier":3,"acked_ahead":[]}`)
		}, Options{})
		st, err := c.Consumer(context.Background(), "t", 0)
		if err != nil || st.Frontier != 3 {
			t.Fatalf("consumer state: %+v, %v", st, err)
		}
		if len(sent) != 2 || sent[1].Sub(sent[0]) != time.Second {
			t.Fatalf("%d sends at %v; want 2, a second apart (Retry-After)", len(sent), sent)
		}
		sent, failures = nil, 100
		if _, err := c.Consumer(context.Background(), "t", 0); !errors.Is(err, ErrBusy) || len(sent) != 4 {
			t.Fatalf("always busy: %v after %d sends; want ErrBusy after 1 + 3 retries", err, len(sent))
		}
	})
}

// TestErrors_CarryTheAnswer: an error answer is an *Error with the API's
// code, its fields, and errors.Is against the code's sentinel.
func TestErrors_CarryTheAnswer(t *testing.T) {
	c := fakeClient(t, func(r *http.Request) *http.Response {
		switch {
		case strings.HasSuffix(r.URL.Path, "/gone/partitions/0/records"):
			return answer(410, `{"error":{"code":"offset_deleted","message":"m"},"start_offset":40}`)
		case strings.HasSuffix(r.URL.Path, "/damaged/partitions/0/records"):
			return answer(410, `{"error":{"code":"record_unreadable","message":"m"},"next_offset":12}`)
		}
		return answer(502, "bad gateway")
	}, Options{})
	_, err := c.Fetch(context.Background(), "gone", 0, 3, FetchOptions{})
	var e *Error
	if !errors.Is(err, ErrOffsetDeleted) || errors.Is(err, ErrRecordUnreadable) || !errors.As(err, &e) || e.StartOffset == nil || *e.StartOffset != 40 || e.Status != 410 {
		t.Fatalf("offset_deleted: %v", err)
	}
	_, err = c.Fetch(context.Background(), "damaged", 0, 3, FetchOptions{})
	if !errors.Is(err, ErrRecordUnreadable) || !errors.As(err, &e) || e.NextOffset == nil || *e.NextOffset != 12 {
		t.Fatalf("record_unreadable: %v", err)
	}
	_, err = c.Topic(context.Background(), "x")
	if !errors.As(err, &e) || e.Code != "http_502" || e.Message != "bad gateway" {
		t.Fatalf("a non-API answer: %v", err)
	}
}

// TestNew_Addresses: host:port, http and https URLs; anything else is
// refused.
func TestNew_Addresses(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:7480": "http://127.0.0.1:7480", "http://h:1/": "http://h:1", "https://h:1": "https://h:1",
	} {
		c, err := New(addr, Options{})
		if err != nil || c.base.String() != want {
			t.Fatalf("New(%q): %v %v, want %s", addr, c, err, want)
		}
	}
	for _, bad := range []string{"ftp://h:1", "://", "http://"} {
		if _, err := New(bad, Options{}); err == nil {
			t.Fatalf("New(%q) was accepted", bad)
		}
	}
}

// TestFetch_DecodesTheBinaryAnswerAndBoundsIt: records come back exact; a
// cut or absurd answer is an error, never a huge allocation.
func TestFetch_DecodesTheBinaryAnswerAndBoundsIt(t *testing.T) {
	var body []byte
	c := fakeClient(t, func(r *http.Request) *http.Response {
		if r.Header.Get("Accept") != api.BatchMediaType {
			t.Errorf("fetch Accept %q", r.Header.Get("Accept"))
		}
		return answer(200, string(body), "Narad-Next-Offset", "6", "Narad-High-Watermark", "9")
	}, Options{})
	rec := func(offset int64, key, value string) []byte {
		b := make([]byte, 16)
		b[7], b[15] = byte(offset), 1
		b = append(b, byte(len(key)))
		b = append(b, key...)
		b = append(b, byte(len(value)))
		return append(b, value...)
	}
	body = append(rec(4, "", "a\x00\xff"), rec(5, "k", "")...)
	res, err := c.Fetch(context.Background(), "t", 0, 4, FetchOptions{Wait: time.Second})
	if err != nil || len(res.Records) != 2 || res.NextOffset != 6 || res.HighWatermark != 9 ||
		!bytes.Equal(res.Records[0].Value, []byte("a\x00\xff")) || string(res.Records[1].Key) != "k" || res.Records[1].Offset != 5 {
		t.Fatalf("fetch: %+v, %v", res, err)
	}
	body = rec(4, "", "abc")[:18]
	if _, err := c.Fetch(context.Background(), "t", 0, 4, FetchOptions{}); err == nil {
		t.Fatal("a cut answer was taken")
	}
	body = append(make([]byte, 16), 0xff, 0xff, 0xff, 0xff, 0x0f) // a key of 4 GiB
	if _, err := c.Fetch(context.Background(), "t", 0, 4, FetchOptions{}); err == nil {
		t.Fatal("an absurd length was taken")
	}
}

// TestProduce_JSONTextRefusesBytesItCannotCarry: JSONText sends text; a
// record that is not UTF-8 is refused before anything is sent.
func TestProduce_JSONTextRefusesBytesItCannotCarry(t *testing.T) {
	sent := 0
	c := fakeClient(t, func(r *http.Request) *http.Response {
		sent++
		return answer(200, `{"base_offset":0,"count":1,"high_watermark":1}`)
	}, Options{})
	if _, err := c.Produce(context.Background(), "t", 0, []Record{{Value: []byte{0xff}}}, WithEncoding(JSONText)); err == nil || sent != 0 {
		t.Fatalf("JSONText of invalid UTF-8: %v, %d sent", err, sent)
	}
	if _, err := c.Produce(context.Background(), "t", 0, []Record{{Value: []byte{0xff}}}, WithEncoding(JSONBase64)); err != nil || sent != 1 {
		t.Fatalf("JSONBase64: %v, %d sent", err, sent)
	}
}

// TestImports_NothingOfTheEngine: a program that talks to a daemon does
// not build the storage engine (architecture: client depends on api
// only, which depends on the standard library only).
func TestImports_NothingOfTheEngine(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if strings.HasPrefix(path, "github.com/narad-io/storage/") && path != "github.com/narad-io/storage/api" {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}

// TestErrors_EveryCodeHasItsSentinel: every code of the API, answered by a
// daemon, is matched by errors.Is against its sentinel and no other.
func TestErrors_EveryCodeHasItsSentinel(t *testing.T) {
	sentinels := []*Error{ErrInvalidParameter, ErrInvalidBody, ErrInvalidOffset, ErrInvalidTopicName, ErrBadRequest, ErrInvalidPath, ErrBodyTooSlow,
		ErrUnauthorized, ErrNotFound, ErrTopicNotFound, ErrPartitionNotFound, ErrMethodNotAllowed, ErrTopicExists,
		ErrOffsetDeleted, ErrRecordUnreadable, ErrBatchTooLarge, ErrOffsetBeyondHighWatermark, ErrCommitFailed,
		ErrLogPoisoned, ErrMetastoreBroken, ErrUnavailable, ErrNotReady, ErrNoSpace, ErrInternal,
		ErrNotOwner, ErrUnassigned, ErrOwnerUnavailable, ErrMoving, ErrMoveRefused, ErrMoveNotFound, ErrMoveChanged, ErrNotACluster, ErrDictionaryRefused}
	for _, want := range sentinels {
		c := fakeClient(t, func(r *http.Request) *http.Response {
			return answer(400, `{"error":{"code":"`+want.Code+`","message":"m"}}`)
		}, Options{Retries: -1})
		_, err := c.Topic(context.Background(), "t")
		for _, other := range sentinels {
			if errors.Is(err, other) != (other == want) {
				t.Fatalf("code %s: errors.Is(err, %s) = %v", want.Code, other.Code, errors.Is(err, other))
			}
		}
	}
}

// TestDecodeFetched_OneBufferExactList: an answer of a known length or
// not (a streamed one), read a few bytes at a time, gives its records in
// order in a list of exactly their number, each key and value with no
// room past its end.
func TestDecodeFetched_OneBufferExactList(t *testing.T) {
	var answer bytes.Buffer
	bw := api.NewBatchWriter(&answer)
	for i := range 3000 {
		bw.Fetched(api.BatchRecord{Offset: int64(i), CommittedAtMs: 7, Key: []byte("k"), Value: fmt.Appendf(nil, "value %d", i)})
	}
	for _, size := range []int64{int64(answer.Len()), -1} {
		recs, err := decodeFetched(iotest.HalfReader(bytes.NewReader(answer.Bytes())), size)
		if err != nil || len(recs) != 3000 || cap(recs) != 3000 {
			t.Fatalf("size %d: %d records (capacity %d), %v", size, len(recs), cap(recs), err)
		}
		for i, r := range recs {
			if r.Offset != int64(i) || string(r.Key) != "k" || string(r.Value) != fmt.Sprintf("value %d", i) || r.CommittedAt.UnixMilli() != 7 || cap(r.Value) != len(r.Value) {
				t.Fatalf("size %d: record %d is %+v", size, i, r)
			}
		}
	}
	if recs, err := decodeFetched(bytes.NewReader(nil), 0); err != nil || recs != nil {
		t.Fatalf("an empty answer: %v, %v", recs, err)
	}
}
