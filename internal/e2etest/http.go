package e2etest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// API is where a test sends its requests: one node's HTTP API.
type API struct {
	Base string       // scheme://host:port
	HTTP *http.Client // requests go through it; nil: http.DefaultClient
}

// Response is one answer, its body read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Req sends method path with body (nil: none; []byte and string as they
// are; anything else as JSON) and header's name, value pairs, and returns
// the answer. A request that gets no answer fails the test.
func (a API) Req(t testing.TB, method, path string, body any, header ...string) Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, a.Base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	hc := a.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{resp.StatusCode, resp.Header, b}
}

// JSON decodes the body into v, or fails the test.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
}

// Code is the code of an error answer.
func (r Response) Code(t testing.TB) string {
	t.Helper()
	var e ErrorBody
	r.JSON(t, &e)
	return e.Error.Code
}

// Expect fails the test unless r has status and, if code is not empty,
// is an error answer with that code.
func Expect(t testing.TB, r Response, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if code != "" {
		if got := r.Code(t); got != code {
			t.Fatalf("error code %q, want %q: %s", got, code, r.Body)
		}
	}
}
