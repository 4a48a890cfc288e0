package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/narad-io/storage/api"
)

// A produce body is taken as it arrives (docs/http-api.md, "Produce"):
// its bytes count against --max-inflight-bytes as they are read, so a
// client that declares a large body and sends it slowly holds only what it
// sent; and a body must keep up a minimum rate after a grace period, and
// end within the server's read timeout whatever its rate, or its
// connection is cut, so no client holds a connection and its bytes for
// long.
const (
	bodyGrace   = 10 * time.Second
	minBodyRate = 64 << 10 // bytes a second, on average from the body's start
)

var (
	// errBodyBusy: the produce budget had no room for the body's next
	// bytes.
	errBodyBusy = errors.New("the node holds as many produce bytes as it takes at once")
	// errBodySlow: the body arrived slower than minBodyRate.
	errBodySlow = errors.New("the body arrived slower than the minimum rate")
)

// meteredBody reads a produce body for its handler.
//
// Invariants: held is the bytes read and taken from the budget, given
// back by release; err, once set, is why the body was cut and every read
// after answers it; the read deadline it sets (due) is never past
// start+timeout, the server's own (which it replaces).
type meteredBody struct {
	body     io.Reader
	budget   interface{ TryAcquire(int64) bool }
	giveBack func(int64)
	rc       *http.ResponseController
	start    time.Time
	grace    time.Duration
	rate     int64
	timeout  time.Duration // the server's read timeout; 0: none
	held     int64
	err      error
}

// meterBody wraps r's body for the produce handler.
func (a *Handler) meterBody(w http.ResponseWriter, r *http.Request) *meteredBody {
	m := &meteredBody{body: r.Body, rc: http.NewResponseController(w), start: time.Now(),
		grace: a.opts.bodyGrace, rate: a.opts.minBodyRate, timeout: a.opts.ReadTimeout}
	if a.inflight != nil {
		m.budget, m.giveBack = a.inflight, a.inflight.Release
	}
	return m
}

func (m *meteredBody) Read(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	if m.rate > 0 || m.timeout > 0 {
		m.rc.SetReadDeadline(m.due()) // not supported (a test's recorder): no cut
	}
	n, err := m.body.Read(p)
	if n > 0 {
		if m.budget != nil && !m.budget.TryAcquire(int64(n)) {
			m.err = errBodyBusy
			return 0, m.err
		}
		m.held += int64(n)
	}
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		m.err = errBodySlow
		return n, m.err
	}
	return n, err
}

// maxBodyWait bounds the wait the rate allows, so its arithmetic never
// overflows whatever is held.
const maxBodyWait = 100 * 365 * 24 * time.Hour

// due is when the body's next bytes must have come: the bytes so far must
// have come at the rate, after the grace, so the next must come before
// that falls behind; and the body must end within the server's read
// timeout, whatever its rate, as it did before the meter moved the
// deadline (a client that sent much at once then stalled held it all for
// as long as the rate allowed: found by review).
func (m *meteredBody) due() time.Time {
	wait := maxBodyWait
	if m.rate > 0 {
		if seconds := float64(m.held) / float64(m.rate); seconds < maxBodyWait.Seconds() {
			wait = m.grace + time.Duration(seconds*float64(time.Second))
		}
	}
	if m.timeout > 0 {
		wait = min(wait, m.timeout)
	}
	return m.start.Add(wait)
}

// release gives the body's bytes back to the budget, once its records are
// committed or refused.
func (m *meteredBody) release() {
	if m.giveBack != nil && m.held > 0 {
		m.giveBack(m.held)
	}
	m.held = 0
}

// refused answers a body the meter cut, and reports whether it did: 503
// busy (Retry-After) or 408, with the connection closed, since the rest of
// the body is not read.
func (m *meteredBody) refused(w http.ResponseWriter) bool {
	switch m.err {
	case errBodyBusy:
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, api.CodeBusy, "the node holds as many produce bytes as it takes at once (--max-inflight-bytes); nothing was done; retry")
	case errBodySlow:
		w.Header().Set("Connection", "close")
		within := ""
		if m.timeout > 0 {
			within = fmt.Sprintf(", or not whole within %v", m.timeout)
		}
		writeError(w, http.StatusRequestTimeout, api.CodeBodyTooSlow, fmt.Sprintf("the body arrived slower than %d bytes a second after its first %v%s; nothing was done", m.rate, m.grace, within))
	default:
		return false
	}
	return true
}
