package server_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
)

// errMessage is the message of an error answer.
func errMessage(t *testing.T, r e2etest.Response) string {
	t.Helper()
	var e e2etest.ErrorBody
	r.JSON(t, &e)
	return e.Error.Message
}

// expectMessage is expect, and the message names every one of words and
// none of the words a Go program's internals would show.
func expectMessage(t *testing.T, r e2etest.Response, status int, code string, words ...string) {
	t.Helper()
	e2etest.Expect(t, r, status, code)
	msg := errMessage(t, r)
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Fatalf("message %q does not name %q", msg, w)
		}
	}
	for _, leak := range []string{"Go struct", "jsonRecord", "json:", "EOF", "unmarshal", "main.", "/tmp", "runtime:", "partition:"} {
		if strings.Contains(msg, leak) {
			t.Fatalf("message %q shows %q", msg, leak)
		}
	}
}

// TestE2E_ExactInput: every query parameter and JSON field is known or
// refused naming it; invalid UTF-8 in a JSON text is refused naming the
// record, never replaced; errors speak the request's terms.
func TestE2E_ExactInput(t *testing.T) {
	d := startNode(t, t.TempDir())
	e2etest.Expect(t, d.req("PUT", "/v1/topics/in", map[string]any{"partitions": 1}), 201, "")
	const records = "/v1/topics/in/partitions/0/records"

	// Query parameters.
	expectMessage(t, d.req("POST", records+"?encoding=rot13", `{"records":[{"value":"x"}]}`), 400, "invalid_parameter", "encoding", "rot13")
	expectMessage(t, d.req("POST", records+"?encodign=base64", `{"records":[{"value":"x"}]}`), 400, "invalid_parameter", "encodign")
	expectMessage(t, d.req("POST", records+"?encoding=base64&encoding=base64", `{"records":[{"value":"eA=="}]}`), 400, "invalid_parameter", "encoding", "2 times")
	expectMessage(t, d.req("POST", records+"?encoding=base64", []byte{1, 'x'}, "Content-Type", e2etest.BatchContentType), 400, "invalid_parameter", "encoding")
	expectMessage(t, d.req("GET", records+"?offset=0&max_records=0", nil), 400, "invalid_parameter", "max_records")
	expectMessage(t, d.req("GET", records+"?offset=0&max_bytes=x", nil), 400, "invalid_parameter", "max_bytes")
	expectMessage(t, d.req("GET", records+"?offset=0&wait_ms=-5", nil), 400, "invalid_parameter", "wait_ms")
	expectMessage(t, d.req("GET", records+"?offset=0&limit=5", nil), 400, "invalid_parameter", "limit")
	expectMessage(t, d.req("GET", records, nil), 400, "invalid_offset", "offset is required")
	expectMessage(t, d.req("GET", "/v1/topics?verbose=1", nil), 400, "invalid_parameter", "verbose")
	expectMessage(t, d.req("DELETE", "/v1/topics/in?force=true", nil), 400, "invalid_parameter", "force")

	// JSON fields, shapes and the words for them.
	for _, c := range []struct{ body, words string }{
		{`{"records":[{"vaule":"x"}]}`, `record 0|"vaule"`},
		{`{"records":[{"value":"a"},{"value":"b","extra":1}]}`, `record 1|"extra"`},
		{`{"records":[{"key":"k"}]}`, `record 0|"value"`},
		{`{"records":[{"value":"a","value":"b"}]}`, `record 0|twice`},
		{`{"records":[{"value":"a"}],"records":[]}`, `twice`},
		{`{"records":[{"value":"a"}],"compression":"none"}`, `"compression"`},
		{`{"records":[{"value":5}]}`, `record 0|value must be a string`},
		{`{"records":[{"value":"x","key":{}}]}`, `record 0|key must be a string`},
		{`{"records":{}}`, `records`},
		{``, `empty`},
		{`{"records":[{"value":"x"}`, `ends`},
		{`{"records":[]}`, `no records`},
		{`{"records":[{"value":"x"}]} {}`, `trailing`},
	} {
		expectMessage(t, d.req("POST", records, c.body), 400, "invalid_body", strings.Split(c.words, "|")...)
	}
	expectMessage(t, d.req("PUT", "/v1/topics/t2", `{"partitons": 3}`), 400, "invalid_body", `"partitons"`, `"partitions"`)
	expectMessage(t, d.req("PUT", "/v1/topics/t2", `{"partitions": "3"}`), 400, "invalid_body", "partitions must be an integer", "not a string")
	expectMessage(t, d.req("PUT", "/v1/topics/t2", `{}`), 400, "invalid_body", "partitions is required")
	expectMessage(t, d.req("PUT", "/v1/topics/t2", ``), 400, "invalid_body", "empty")
	expectMessage(t, d.req("PATCH", "/v1/topics/in", `{"retention":5}`), 400, "invalid_body", `"retention"`)
	expectMessage(t, d.req("POST", "/v1/topics/in/partitions/0/acks", `{"offset":[0]}`), 400, "invalid_body", `"offset"`)
	expectMessage(t, d.req("POST", "/v1/topics/in/partitions/0/acks", `{"offsets":[-1]}`), 400, "invalid_offset", "offsets[0]", "negative")
	expectMessage(t, d.req("POST", "/v1/topics/in/partitions/0/acks", `{"offsets":[7]}`), 400, "invalid_offset", "high watermark")

	// Invalid UTF-8, raw or escaped, is refused naming the record: every
	// kind of invalid sequence.
	invalid := map[string][]byte{
		"lone continuation byte":  {0x80},
		"overlong encoding":       {0xc0, 0x80},
		"encoded surrogate":       {0xed, 0xa0, 0x80},
		"truncated sequence":      {0xe2, 0x82},
		"byte 0xff":               {0xff},
		"above U+10FFFF":          {0xf4, 0x90, 0x80, 0x80},
		"truncated at the end":    {'o', 'k', 0xf0, 0x9f},
		"continuation after text": {'a', 0xbf, 'b'},
	}
	for name, bad := range invalid {
		body := append([]byte(`{"records":[{"value":"fine"},{"value":"`), bad...)
		body = append(body, `"}]}`...)
		r := d.req("POST", records, body)
		expectMessage(t, r, 400, "invalid_body", "record 1", "UTF-8")
		_ = name
		body = append([]byte(`{"records":[{"key":"`), bad...)
		body = append(body, `","value":"v"}]}`...)
		expectMessage(t, d.req("POST", records, body), 400, "invalid_body", "record 0", "key")
	}
	for _, esc := range []string{`\ud800`, `\uDFFF`, `a\udc00b`, `\ud83d`} {
		expectMessage(t, d.req("POST", records, `{"records":[{"value":"`+esc+`"}]}`), 400, "invalid_body", "record 0", "surrogate")
	}
	// Text that is valid, U+FFFD and escapes included, is stored exactly.
	exact := []string{"plain", "\uFFFD sent as itself", "é, ü, 日本, 😀", ""}
	var body strings.Builder
	body.WriteString(`{"records":[`)
	for i, v := range exact {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"value":%q}`, v)
	}
	body.WriteString(`,{"value":"\ufffd \\ud800 \ud83d\ude00"}]}`)
	e2etest.Expect(t, d.req("POST", records, body.String()), 200, "")
	exact = append(exact, "\uFFFD \\ud800 😀")

	// Bytes that are not UTF-8 go in with base64 and come back exactly:
	// base64 and flagged in a text fetch, never replaced.
	var names []string
	var b64 strings.Builder
	b64.WriteString(`{"records":[`)
	i := 0
	for name, bad := range invalid {
		names = append(names, name)
		if i > 0 {
			b64.WriteString(",")
		}
		i++
		fmt.Fprintf(&b64, `{"key":%q,"value":%q}`, base64.StdEncoding.EncodeToString([]byte("k")), base64.StdEncoding.EncodeToString(bad))
	}
	b64.WriteString("]}")
	e2etest.Expect(t, d.req("POST", records+"?encoding=base64", b64.String()), 200, "")
	var f struct {
		Records []fetchedRecord `json:"records"`
	}
	d.req("GET", records+"?offset=0", nil).JSON(t, &f)
	if len(f.Records) != len(exact)+len(invalid) {
		t.Fatalf("fetched %d records, want %d", len(f.Records), len(exact)+len(invalid))
	}
	for i, want := range exact {
		if r := f.Records[i]; r.Value != want || r.Encoding != "" {
			t.Fatalf("record %d: %q (encoding %q), want %q as text", i, r.Value, r.Encoding, want)
		}
	}
	for i, name := range names {
		r := f.Records[len(exact)+i]
		got, err := base64.StdEncoding.DecodeString(r.Value)
		if r.Encoding != "base64" || err != nil || string(got) != string(invalid[name]) || r.Key == nil || *r.Key != base64.StdEncoding.EncodeToString([]byte("k")) {
			t.Fatalf("%s: fetched %+v, want its exact bytes base64 and flagged", name, r)
		}
	}

	// A wrong method on a known path: 405 with Allow; an unknown path: 404.
	r := d.req("DELETE", records, nil)
	expectMessage(t, r, 405, "method_not_allowed", "DELETE")
	if r.Header.Get("Allow") != "GET, POST, HEAD" {
		t.Fatalf("Allow %q", r.Header.Get("Allow"))
	}
	r = d.req("POST", "/v1/topics/in", nil)
	e2etest.Expect(t, r, 405, "method_not_allowed")
	if r.Header.Get("Allow") != "GET, PUT, PATCH, DELETE, HEAD" {
		t.Fatalf("Allow %q", r.Header.Get("Allow"))
	}
	e2etest.Expect(t, d.req("GET", "/v2/topics", nil), 404, "not_found")
	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
}

// fetchedRecord is one record of a JSON fetch. Encoding is "base64" when
// key and value are base64 though the fetch asked for text: the record's
// bytes are not valid UTF-8, and JSON text cannot carry them exactly.
type fetchedRecord struct {
	Offset        int64   `json:"offset"`
	Key           *string `json:"key,omitempty"`
	Value         string  `json:"value"`
	Encoding      string  `json:"encoding,omitempty"`
	CommittedAtMs int64   `json:"committed_at_ms"`
}
