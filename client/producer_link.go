package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/narad-io/storage/api"
)

// link carries a sender's produce requests to one node and brings back
// each request's outcome on the sender's answers channel, in the order
// the requests were sent.
type link interface {
	// send sends b's request. An error says it was not sent whole, so
	// nothing was done: b gets no answer.
	send(b *batch) error
	// close ends the link once its goroutines are done; a request still
	// awaited is answered ambiguous.
	close()
}

// reply is a request's outcome, from a link to its sender.
type reply struct {
	b   *batch
	out outcome
}

var (
	// errLinkBroken: a send on a link whose connection is gone; the
	// request was not written.
	errLinkBroken = errors.New("narad: the connection was closed before the request was written")
	// errServerClosed: an answer closed the connection (Connection:
	// close); the requests written behind it were not read.
	errServerClosed = errors.New("narad: the node closed the connection after an earlier answer; the request was not read")
	errLinkClosed   = errors.New("narad: the connection was closed")
)

// dialTimeout bounds a link's connect and TLS handshake.
const dialTimeout = 10 * time.Second

// pipeLink is one HTTP/1.1 connection on which a partition's produce
// requests are written back to back (pipelined) while the answers are
// read in order. A node's HTTP server handles one connection's requests
// one after the other, in the order they came, so the commits of a
// partition follow the order its requests were written (sender's
// invariants).
//
// Invariants: pending holds the requests written whole and not yet
// answered, in the order written; mu is held across each write and its
// push to pending, and by broke when it marks the link broken, so a
// request is either written and then answered by the reader, or refused
// (errLinkBroken) without being written.
type pipeLink struct {
	c       *Client
	conn    net.Conn
	br      *bufio.Reader
	bw      *bufio.Writer
	head    []byte // a request's head up to its Content-Length
	answers chan<- reply
	pending chan *batch

	mu     sync.Mutex
	broken bool // under mu

	quit       chan struct{}
	once       sync.Once
	readerDone chan struct{}
	stopAbort  func() bool // stops closing conn at ctx's end
}

// dialPipe connects to the node at base (TLS for https, offering
// HTTP/1.1 alone) and starts the link's reader. ctx's end closes the
// connection.
func dialPipe(ctx context.Context, c *Client, base *url.URL, path string, answers chan<- reply) (*pipeLink, error) {
	if !validHeaderValue(c.token) {
		return nil, errors.New("narad: the token holds a byte a header cannot carry")
	}
	addr := base.Host
	if base.Port() == "" {
		port := "80"
		if base.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(base.Hostname(), port)
	}
	dialer := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if base.Scheme == "https" {
		cfg := &tls.Config{}
		if c.tls != nil {
			cfg = c.tls.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = base.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(conn, cfg)
		hctx, cancel := context.WithTimeout(ctx, dialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	head := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\n", base.Path+path, base.Host, api.BatchMediaType)
	if c.token != "" {
		head = fmt.Appendf(head, "Authorization: Bearer %s\r\n", c.token)
	}
	head = append(head, "Content-Length: "...)
	l := &pipeLink{c: c, conn: conn, br: bufio.NewReaderSize(conn, 16<<10), bw: bufio.NewWriterSize(conn, 64<<10), head: head,
		answers: answers, pending: make(chan *batch, cap(answers)), quit: make(chan struct{}), readerDone: make(chan struct{})}
	l.stopAbort = context.AfterFunc(ctx, func() { conn.Close() })
	go l.read()
	return l, nil
}

func (l *pipeLink) send(b *batch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken {
		return errLinkBroken
	}
	l.bw.Write(l.head)
	l.bw.WriteString(strconv.Itoa(len(b.body)))
	l.bw.WriteString("\r\n\r\n")
	l.bw.Write(b.body)
	if err := l.bw.Flush(); err != nil {
		l.conn.Close() // the reader finds it broken
		return err
	}
	l.pending <- b // never blocks: its sender has at most cap in flight
	return nil
}

// read reads the answers, one a request written, in order, until the
// connection breaks, an answer closes it, or the link is closed.
func (l *pipeLink) read() {
	defer close(l.readerDone)
	for {
		var b *batch
		select {
		case b = <-l.pending:
		case <-l.quit:
			l.broke(nil, errLinkClosed, ambiguous)
			return
		}
		resp, err := http.ReadResponse(l.br, nil)
		if err != nil {
			l.broke(b, err, ambiguous)
			return
		}
		out := l.c.outcomeOfAnswer(resp, b.records)
		whole := readToEnd(resp)
		if resp.Close || !whole {
			l.markBroken() // before the answer: no send after it writes here
		}
		l.answers <- reply{b: b, out: out}
		switch {
		case resp.Close:
			l.broke(nil, errServerClosed, notProcessed)
			return
		case !whole:
			l.broke(nil, errors.New("narad: an answer too long to read past"), ambiguous)
			return
		}
	}
}

// readToEnd reads what is left of an answer's body and closes it; false
// if it did not end within 1 MiB (the next answer cannot be found).
func readToEnd(resp *http.Response) bool {
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return err == nil && n < 1<<20
}

// broke ends the link's reading: the connection closed, the link marked
// broken (a send after it writes nothing), first (if any) answered
// ambiguous, and every request still pending answered rest.
func (l *pipeLink) broke(first *batch, err error, rest kind) {
	l.markBroken()
	if first != nil {
		l.answers <- reply{b: first, out: outcome{kind: ambiguous, err: err}}
	}
	for {
		select {
		case b := <-l.pending:
			l.answers <- reply{b: b, out: outcome{kind: rest, err: err}}
		default:
			return
		}
	}
}

// markBroken closes the connection and marks the link broken: a send
// after it writes nothing. It waits for a write under way to end.
func (l *pipeLink) markBroken() {
	l.conn.Close()
	l.mu.Lock()
	l.broken = true
	l.mu.Unlock()
}

func (l *pipeLink) close() {
	l.once.Do(func() {
		close(l.quit)
		l.conn.Close()
	})
	<-l.readerDone
	l.stopAbort()
}

// validHeaderValue says v holds no byte a header value cannot (a control
// byte but tab), so it cannot end the header early.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// roundTripLink sends each request through the client's http.Client
// (Options.HTTPClient, the caller's), one call a request. Such a
// transport may run two requests on two connections in either order, so
// its sender has one in flight at a time.
type roundTripLink struct {
	ctx     context.Context
	c       *Client
	base    *url.URL
	path    string
	answers chan<- reply
	wg      sync.WaitGroup
}

func newRoundTripLink(ctx context.Context, c *Client, base *url.URL, path string, answers chan<- reply) *roundTripLink {
	return &roundTripLink{ctx: ctx, c: c, base: base, path: path, answers: answers}
}

func (l *roundTripLink) send(b *batch) error {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		resp, err := l.c.send(l.ctx, l.base, request{method: http.MethodPost, path: l.path, body: b.body, contentType: api.BatchMediaType})
		var out outcome
		var op *net.OpError
		switch {
		case err == nil:
			out = l.c.outcomeOfAnswer(resp, b.records)
			drain(resp)
		case errors.As(err, &op) && op.Op == "dial":
			out = outcome{kind: nothingDone, err: err} // never connected: nothing sent
		default:
			out = l.c.outcomeOfError(err)
		}
		l.answers <- reply{b: b, out: out}
	}()
	return nil
}

func (l *roundTripLink) close() { l.wg.Wait() }
