package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// cluster is a fake cluster of nodes by host: each answers from its own
// function, or fails to connect while down.
type cluster struct {
	mu    sync.Mutex
	nodes map[string]func(*http.Request) *http.Response
	down  map[string]bool
	calls []string // host and path of every request, in order
}

func (c *cluster) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.calls = append(c.calls, r.URL.Host+" "+r.Method+" "+r.URL.Path)
	node, down := c.nodes[r.URL.Host], c.down[r.URL.Host]
	c.mu.Unlock()
	if down || node == nil {
		return nil, errors.New("connection refused")
	}
	return node(r), nil
}

func (c *cluster) took() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

func misdirected(owner string) *http.Response {
	return answer(421, `{"error":{"code":"not_owner","message":"m"},"owner":{"node_id":"b","addr":"`+owner+`"}}`)
}

// TestClient_FollowsTheOwnerAndRemembersIt: a call for a partition that
// another node owns is sent again to the owner the 421 names, and the
// partition's later calls (a fetch, a cursor read) go straight to it; a
// call to the remembered owner that cannot connect forgets it, so the
// next one asks the node given, which names the new owner. Calls that
// are not a partition's stay with the node given.
func TestClient_FollowsTheOwnerAndRemembersIt(t *testing.T) {
	owner := "127.0.0.1:7481"
	cl := &cluster{down: map[string]bool{}}
	cl.nodes = map[string]func(*http.Request) *http.Response{
		"127.0.0.1:7480": func(r *http.Request) *http.Response {
			if strings.Contains(r.URL.Path, "/partitions/") {
				return misdirected("http://" + owner)
			}
			return answer(200, `{"name":"orders","partitions":[]}`)
		},
		"127.0.0.1:7481": func(r *http.Request) *http.Response {
			switch {
			case r.Method == http.MethodPost:
				return answer(200, `{"base_offset":0,"count":1,"high_watermark":1}`)
			case strings.Contains(r.URL.Path, "/cursors/"):
				return answer(200, `{"records":[],"next_offset":1,"high_watermark":1,"skipped":0}`)
			}
			return answer(200, "", "Narad-Next-Offset", "1", "Narad-High-Watermark", "1")
		},
		"127.0.0.1:7482": func(r *http.Request) *http.Response {
			return answer(200, `{"base_offset":1,"count":1,"high_watermark":2}`)
		},
	}
	c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: cl}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Produce(ctx, "orders", 3, []Record{{Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1:7480 POST /v1/topics/orders/partitions/3/records", "127.0.0.1:7481 POST /v1/topics/orders/partitions/3/records"}
	if got := cl.took(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("produce went %v; want %v", got, want)
	}
	if _, err := c.Fetch(ctx, "orders", 3, 0, FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadCursor(ctx, "orders", "audit", 3, CursorReadOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Topic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	want = []string{"127.0.0.1:7481 GET /v1/topics/orders/partitions/3/records", "127.0.0.1:7481 GET /v1/topics/orders/cursors/audit/partitions/3/records",
		"127.0.0.1:7480 GET /v1/topics/orders"}
	if got := cl.took(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("later calls went %v; want %v", got, want)
	}

	// The owner goes away; the partition moved to 7482.
	cl.mu.Lock()
	cl.down[owner] = true
	cl.mu.Unlock()
	owner = "127.0.0.1:7482"
	if _, err := c.Produce(ctx, "orders", 3, []Record{{Value: []byte("v")}}); err == nil {
		t.Fatal("a produce to an owner that cannot be reached succeeded")
	}
	if res, err := c.Produce(ctx, "orders", 3, []Record{{Value: []byte("v")}}); err != nil || res.BaseOffset != 1 {
		t.Fatalf("produce after the owner went: %+v, %v", res, err)
	}
	want = []string{"127.0.0.1:7481 POST /v1/topics/orders/partitions/3/records", "127.0.0.1:7480 POST /v1/topics/orders/partitions/3/records",
		"127.0.0.1:7482 POST /v1/topics/orders/partitions/3/records"}
	if got := cl.took(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("calls around the lost owner went %v; want %v", got, want)
	}
}

// TestClient_RedirectsAreBounded: nodes that keep naming each other (a
// replica behind a move, say) are followed maxRedirects times, then the
// 421 is the call's error.
func TestClient_RedirectsAreBounded(t *testing.T) {
	cl := &cluster{}
	cl.nodes = map[string]func(*http.Request) *http.Response{
		"127.0.0.1:7480": func(*http.Request) *http.Response { return misdirected("http://127.0.0.1:7481") },
		"127.0.0.1:7481": func(*http.Request) *http.Response { return misdirected("http://127.0.0.1:7480") },
	}
	c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: cl}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(context.Background(), "orders", 0, 0, FetchOptions{})
	var e *Error
	if !errors.Is(err, ErrNotOwner) || !errors.As(err, &e) || e.Owner == nil || e.Owner.NodeID != "b" {
		t.Fatalf("a redirect loop: %v; want ErrNotOwner naming the owner", err)
	}
	if n := len(cl.took()); n != 1+maxRedirects {
		t.Fatalf("%d requests for a redirect loop; want %d", n, 1+maxRedirects)
	}
}

// TestClient_RetriesAPartitionWithoutAnOwnerYet: 503 unassigned (a new
// topic whose partitions the assigner has not given out yet) is retried
// after its Retry-After; owner_unavailable (the owner is down) is the
// caller's, at once.
func TestClient_RetriesAPartitionWithoutAnOwnerYet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Time
		c := fakeClient(t, func(r *http.Request) *http.Response {
			sent = append(sent, time.Now())
			switch {
			case strings.Contains(r.URL.Path, "/partitions/1/"):
				return answer(503, `{"error":{"code":"owner_unavailable","message":"m"},"owner":{"node_id":"c","addr":""}}`, "Retry-After", "5")
			case len(sent) == 1:
				return answer(503, `{"error":{"code":"unassigned","message":"m"}}`, "Retry-After", "1")
			}
			return answer(200, `{"base_offset":0,"count":1,"high_watermark":1}`)
		}, Options{})
		if _, err := c.Produce(context.Background(), "orders", 0, []Record{{Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
		if len(sent) != 2 || sent[1].Sub(sent[0]) != time.Second {
			t.Fatalf("%d sends at %v; want 2, a second apart", len(sent), sent)
		}
		sent = nil
		_, err := c.Produce(context.Background(), "orders", 1, []Record{{Value: []byte("v")}})
		var e *Error
		if !errors.Is(err, ErrOwnerUnavailable) || !errors.As(err, &e) || e.Owner == nil || e.Owner.NodeID != "c" || len(sent) != 1 {
			t.Fatalf("owner down: %v after %d sends; want ErrOwnerUnavailable naming c, once", err, len(sent))
		}
	})
}

// TestClient_RetriesAFrozenPartition: 503 moving (a move froze the
// partition; no node serves it until the move completes) said nothing
// was done, so the call is sent again after its Retry-After.
func TestClient_RetriesAFrozenPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Time
		c := fakeClient(t, func(r *http.Request) *http.Response {
			sent = append(sent, time.Now())
			if len(sent) == 1 {
				return answer(503, `{"error":{"code":"moving","message":"m"}}`, "Retry-After", "2")
			}
			return answer(200, `{"frontier":1}`)
		}, Options{})
		if frontier, err := c.Ack(context.Background(), "orders", 0, 0); err != nil || frontier != 1 {
			t.Fatalf("ack: %d, %v", frontier, err)
		}
		if len(sent) != 2 || sent[1].Sub(sent[0]) != 2*time.Second {
			t.Fatalf("%d sends at %v; want 2, two seconds apart (Retry-After)", len(sent), sent)
		}
	})
}

// TestClient_ForgetsAFencedOwner: an owner the client learned that
// answers 503 fenced (it stopped serving: it may be marked lost and its
// partitions given away) is the call's error, not retried, and is
// forgotten: the next call asks the node the client was made with.
func TestClient_ForgetsAFencedOwner(t *testing.T) {
	cl := &cluster{}
	cl.nodes = map[string]func(*http.Request) *http.Response{
		"127.0.0.1:7480": func(*http.Request) *http.Response { return misdirected("http://127.0.0.1:7481") },
		"127.0.0.1:7481": func(*http.Request) *http.Response {
			return answer(503, `{"error":{"code":"fenced","message":"m"}}`)
		},
	}
	c, err := New("127.0.0.1:7480", Options{HTTPClient: &http.Client{Transport: cl}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Ack(context.Background(), "orders", 3, 0); !errors.Is(err, ErrFenced) {
			t.Fatalf("ack through a fenced owner: %v; want ErrFenced", err)
		}
	}
	want := []string{"127.0.0.1:7480 POST /v1/topics/orders/partitions/3/acks", "127.0.0.1:7481 POST /v1/topics/orders/partitions/3/acks",
		"127.0.0.1:7480 POST /v1/topics/orders/partitions/3/acks", "127.0.0.1:7481 POST /v1/topics/orders/partitions/3/acks"}
	if got := cl.took(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("calls went %v; want %v", got, want)
	}
}

// TestClient_NeverFollowsARedirectOffTLS: a 421 naming an http owner to a
// client made for https is the call's error: the token never crosses the
// network in clear (found by review).
func TestClient_NeverFollowsARedirectOffTLS(t *testing.T) {
	cl := &cluster{}
	cl.nodes = map[string]func(*http.Request) *http.Response{
		"a.example:7480": func(*http.Request) *http.Response { return misdirected("http://b.example:7481") },
		"b.example:7481": func(*http.Request) *http.Response {
			return answer(200, `{"base_offset":0,"count":1,"high_watermark":1}`)
		},
	}
	c, err := New("https://a.example:7480", Options{Token: "s3cret", HTTPClient: &http.Client{Transport: cl}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(context.Background(), "orders", 0, []Record{{Value: []byte("v")}}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a redirect from https to http: %v, want ErrNotOwner", err)
	}
	if got := cl.took(); len(got) != 1 {
		t.Fatalf("requests sent: %v; want only the first", got)
	}
}

// TestPartitionOf_OnlyThePartitionPaths: the owner cache's key comes from
// the two partition path shapes only; a cursor named "partitions" is no
// partition (found by review).
func TestPartitionOf_OnlyThePartitionPaths(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/topics/orders/partitions/3/records":                  "orders/3",
		"/v1/topics/orders/partitions/3/acks":                     "orders/3",
		"/v1/topics/orders/cursors/audit/partitions/2/records":    "orders/2",
		"/v1/topics/orders/cursors/partitions/partitions/1":       "orders/1",
		"/v1/topics/orders/cursors/partitions":                    "",
		"/v1/topics/orders":                                       "",
		"/v1/topics/orders/consume":                               "",
		"/v2/topics/orders/partitions/3/records":                  "",
		"/v1/topics/orders/cursors/audit/notpartitions/2/records": "",
	} {
		got, ok := partitionOf(path)
		if got != want || ok != (want != "") {
			t.Fatalf("%s: %q, %v; want %q", path, got, ok, want)
		}
	}
}
