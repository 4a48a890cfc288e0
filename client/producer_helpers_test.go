package client

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/narad-io/storage/server"
)

// realNode is a node (package server, the daemon's own) on a temporary
// directory, its API served by httptest through a wrapper of the test's.
type realNode struct {
	s   *server.Server
	srv *httptest.Server
	ear *earListener
	c   *Client
}

// startRealNode starts a node whose handler wrap wraps (nil: none),
// configured by configure; its client is made with opts.
func startRealNode(t testing.TB, wrap func(http.Handler) http.Handler, opts Options, configure ...func(*server.Config)) *realNode {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "" // served by httptest
	cfg.MinFreeBytes, cfg.MinFreeInodes = 0, 0
	for _, f := range configure {
		f(&cfg)
	}
	ctx := context.Background()
	s, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		s.Close()
		t.Fatal(err)
	}
	h := s.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	n := &realNode{s: s, srv: httptest.NewUnstartedServer(h)}
	n.ear = &earListener{Listener: n.srv.Listener, heard: make(chan struct{})}
	n.srv.Listener = n.ear
	n.srv.Start()
	if n.c, err = New(n.srv.URL, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.c.http.CloseIdleConnections()
		n.srv.Close()
		if err := s.Close(); err != nil {
			t.Errorf("node close: %v", err)
		}
	})
	return n
}

// topic creates a topic of partitions partitions on the node.
func (n *realNode) topic(t testing.TB, name string, partitions int) {
	t.Helper()
	if _, _, err := n.c.CreateTopic(context.Background(), name, partitions, Retention{}); err != nil {
		t.Fatal(err)
	}
}

// records fetches every record of a partition.
func (n *realNode) records(t testing.TB, topic string, p int) []FetchedRecord {
	t.Helper()
	var out []FetchedRecord
	for offset := int64(0); ; {
		f, err := n.c.Fetch(context.Background(), topic, p, offset, FetchOptions{MaxRecords: 10000})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f.Records...)
		if f.NextOffset == f.HighWatermark {
			return out
		}
		offset = f.NextOffset
	}
}

// earListener's connections read ahead of the server (into memory, as
// fast as bytes arrive) and count the produce requests that came in, so
// a test knows requests were written before the server reads them.
type earListener struct {
	net.Listener
	mu       sync.Mutex
	produces int           // "POST /v1/topics/" heard, on every connection
	heard    chan struct{} // closed and replaced at each
}

func (l *earListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	e := &earConn{Conn: c, l: l}
	e.cond = sync.NewCond(&e.mu)
	go e.pump()
	return e, nil
}

// waitProduces returns once n produce requests were heard in all.
func (l *earListener) waitProduces(n int) {
	for {
		l.mu.Lock()
		got, ch := l.produces, l.heard
		l.mu.Unlock()
		if got >= n {
			return
		}
		<-ch
	}
}

type earConn struct {
	net.Conn
	l    *earListener
	mu   sync.Mutex
	cond *sync.Cond
	buf  bytes.Buffer
	tail string // the last bytes heard, for a mark split across reads
	err  error  // the connection's read error, once it came
	// deadline is the server's read deadline (it sets one in the past
	// to interrupt a read), which Read keeps as the real conn would.
	deadline time.Time
}

func (e *earConn) SetReadDeadline(t time.Time) error {
	e.mu.Lock()
	e.deadline = t
	e.cond.Broadcast()
	e.mu.Unlock()
	if d := time.Until(t); !t.IsZero() && d > 0 {
		time.AfterFunc(d, func() {
			e.mu.Lock()
			e.cond.Broadcast()
			e.mu.Unlock()
		})
	}
	return nil
}

func (e *earConn) SetDeadline(t time.Time) error {
	e.SetReadDeadline(t)
	return e.Conn.SetWriteDeadline(t)
}

const produceMark = "POST /v1/topics/"

func (e *earConn) pump() {
	b := make([]byte, 32<<10)
	for {
		n, err := e.Conn.Read(b)
		e.mu.Lock()
		e.buf.Write(b[:n])
		seen := e.tail + string(b[:n])
		marks := strings.Count(seen, produceMark)
		e.tail = seen[max(0, len(seen)-len(produceMark)+1):]
		if err != nil {
			e.err = err
		}
		e.cond.Broadcast()
		e.mu.Unlock()
		if marks > 0 {
			e.l.mu.Lock()
			e.l.produces += marks
			close(e.l.heard)
			e.l.heard = make(chan struct{})
			e.l.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (e *earConn) Read(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.buf.Len() == 0 && e.err == nil {
		if !e.deadline.IsZero() && !time.Now().Before(e.deadline) {
			return 0, os.ErrDeadlineExceeded
		}
		e.cond.Wait()
	}
	if e.buf.Len() > 0 {
		return e.buf.Read(p)
	}
	return 0, e.err
}

// produceGate wraps a handler: produce requests of a partition wait for
// the gate to open (each one reports on arrived first), others pass.
type produceGate struct {
	mu      sync.Mutex
	open    chan struct{}
	arrived chan struct{}
}

func newProduceGate() *produceGate {
	return &produceGate{open: make(chan struct{}), arrived: make(chan struct{}, 1000)}
}

func (g *produceGate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/records") {
			g.arrived <- struct{}{}
			<-g.open
		}
		h.ServeHTTP(w, r)
	})
}

func (g *produceGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}
