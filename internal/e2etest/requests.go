package e2etest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Requests is a client's transport that counts the fetches it sends and
// tells of each topic-wide wait as it goes out, so a test learns where a
// consumer stands (every partition read, the idle ones waited on)
// without sleeping.
type Requests struct {
	next    http.RoundTripper
	waits   chan SentWait
	mu      sync.Mutex
	fetches int
}

// SentWait is a topic-wide wait as sent: the node asked (host:port) and
// the partitions it names.
type SentWait struct {
	Host       string
	Partitions []int
}

// WatchRequests wraps next (nil: http.DefaultTransport).
func WatchRequests(next http.RoundTripper) *Requests {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Requests{next: next, waits: make(chan SentWait, 1024)}
}

func (r *Requests) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/records"):
		r.mu.Lock()
		r.fetches++
		r.mu.Unlock()
	case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/wait") && req.Body != nil:
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		var body struct {
			Positions []struct {
				Partition int `json:"partition"`
			} `json:"positions"`
		}
		json.Unmarshal(b, &body)
		sent := SentWait{Host: req.URL.Host}
		for _, pp := range body.Positions {
			sent.Partitions = append(sent.Partitions, pp.Partition)
		}
		select {
		case r.waits <- sent:
		default: // nobody reads them: the test no longer cares
		}
	}
	return r.next.RoundTrip(req)
}

// Fetches is how many fetches went out so far.
func (r *Requests) Fetches() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fetches
}

// NextWait returns the next topic-wide wait sent; one that never comes
// fails the test after a minute, never hangs it.
func (r *Requests) NextWait(t testing.TB) SentWait {
	t.Helper()
	select {
	case w := <-r.waits:
		return w
	case <-time.After(time.Minute):
		t.Fatal("no topic-wide wait was sent")
		return SentWait{}
	}
}
