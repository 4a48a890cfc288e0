package server

import (
	"errors"
	"math"
	"net"
	"sync"
	"sync/atomic"

	"github.com/narad-io/storage/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// Connections (docs/http-api.md, "Connections"): the daemon holds at most
// --max-connections at once, so clients can never take the descriptors
// the partition logs need; past it a new connection waits in the
// kernel's backlog until one closes. A connection that has not
// authenticated (a daemon with a token) is never kept alive: its first
// answer, a 401 or not, closes it, and before its first request it is
// kept only for the header timeout.

// defaultMaxConnections is the connection cap the open-file limit allows:
// an eighth of it, at least 128 (half of the descriptors the open-log
// budget leaves to sockets and the rest); 0 (no cap) when the limit is
// unlimited or unknown. The open-log budget is then what remains
// (runtime.DefaultMaxOpenLogsBeside).
func defaultMaxConnections() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY || lim.Cur > math.MaxInt32 {
		return 0
	}
	return max(runtime.DescriptorHeadroom/2, int(lim.Cur)/8)
}

// limitListener accepts at most cap connections open at once.
//
// Invariants: slots holds one token per connection accepted and not yet
// closed; a connection gives its token back once, at its first Close;
// closed is closed by Close, which ends an Accept waiting for a slot.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	open      atomic.Int64
}

func newLimitListener(l net.Listener, cap int, reg prometheus.Registerer) *limitListener {
	ll := &limitListener{Listener: l, slots: make(chan struct{}, cap), closed: make(chan struct{})}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "narad_http_connections", Help: "Client connections open now."},
			func() float64 { return float64(ll.open.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "narad_http_connections_limit", Help: "Client connections open at once at most (--max-connections)."},
			func() float64 { return float64(cap) }))
	return ll
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	l.open.Add(1)
	return &limitedConn{Conn: c, release: sync.OnceFunc(func() { l.open.Add(-1); <-l.slots })}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitedConn gives its slot back when it closes.
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// CloseWrite half-closes the connection, as a *net.TCPConn does: net/http
// sends its last answer's FIN so before it drops a connection whose
// request it did not read whole, and does only when it finds CloseWrite.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
