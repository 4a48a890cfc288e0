package main

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
)

// rawRequest sends text as it is (no client cleans or rewrites it) and
// reads the answer.
func (d *daemon) rawRequest(text string) response {
	d.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(d.addr, "http://"))
	if err != nil {
		d.t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(text)); err != nil {
		d.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		d.t.Fatalf("%q: %v", strings.SplitN(text, "\r\n", 2)[0], err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&body)
	return response{resp.StatusCode, resp.Header, []byte(body.String())}
}

// TestE2E_OddRequestsAreAnsweredExactly: what outside review found
// answered other than "taken exactly or refused" (issue: a daemon no
// client can take down, items 4 to 7): OPTIONS * is a JSON 400 like GET *;
// a path that is not clean is a JSON 400 naming it, never a redirect a
// client would follow to another resource; every integer of a query is
// read in one canonical decimal form, as a path's; a message names the
// problem the value has.
func TestE2E_OddRequestsAreAnsweredExactly(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	expect(t, d.req("PUT", "/v1/topics/in", map[string]any{"partitions": 1}), 201, "")

	for _, req := range []string{"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", "GET * HTTP/1.1\r\nHost: x\r\n\r\n"} {
		r := d.rawRequest(req)
		if r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%q: content type %q", req, r.header.Get("Content-Type"))
		}
		expect(t, r, 400, "bad_request")
	}

	for _, path := range []string{"/v1/topics//", "/v1/topics/../topics/zz", "/v1/topics/./zz", "//v1/topics/zz"} {
		r := d.rawRequest("PUT " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"partitions\": 1}")
		if loc := r.header.Get("Location"); loc != "" {
			t.Fatalf("PUT %s: redirected to %s", path, loc)
		}
		expectMessage(t, r, 400, "invalid_path", path)
	}
	expect(t, d.req("GET", "/v1/topics/zz", nil), 404, "topic_not_found")

	const records = "/v1/topics/in/partitions/0/records"
	for _, q := range []string{"offset=%2B1", "offset=01", "offset=0&max_records=%2B1", "offset=0&max_records=010", "offset=0&wait_ms=%2B0"} {
		r := d.req("GET", records+"?"+q, nil)
		if r.status != 400 {
			t.Fatalf("?%s: %d %s; want 400", q, r.status, r.body)
		}
	}
	expect(t, d.req("GET", records+"?offset=0&max_records=10", nil), 200, "")
	expect(t, d.req("GET", "/v1/topics/in/partitions/00/records?offset=0", nil), 404, "")

	expect(t, d.req("PUT", "/v1/topics/in/cursors/audit", nil), 201, "")
	expectMessage(t, d.req("PUT", "/v1/topics/in/cursors/audit/partitions/0", `{"position": -1}`), 400, "invalid_body", "position must be from 0", "-1")
	expectMessage(t, d.req("POST", "/v1/topics/in/partitions/0/nacks", `{"lease_id": -1, "offsets": [0]}`), 400, "invalid_body", "lease_id", "-1 is not an integer from 0 to 18446744073709551615")
	expectMessage(t, d.req("POST", "/v1/topics/in/partitions/0/acks", `{"offsets": [99999999999999999999]}`), 400, "invalid_body", "offsets", "99999999999999999999 is not an integer from")
	expectMessage(t, d.req("POST", "/v1/topics/in/partitions/0/acks", `{"offsets": [1.5]}`), 400, "invalid_body", "offsets", "must be an integer")
}
