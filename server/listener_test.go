package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLimitListener_HoldsAtMostItsCap: with two connections open at a cap
// of two, a third is accepted only once one of them closes (closing one
// twice frees one slot); Close ends an Accept waiting for a slot.
func TestLimitListener_HoldsAtMostItsCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 2, prometheus.NewRegistry())
	accepted := make(chan net.Conn)
	ended := make(chan error, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				ended <- err
				return
			}
			if open := l.open.Load(); open > 2 {
				t.Errorf("%d connections open, cap 2", open)
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	if len(l.slots) != 2 {
		t.Fatalf("%d slots taken with two connections accepted", len(l.slots))
	}
	first.Close()
	first.Close()
	third := <-accepted
	if len(l.slots) != 2 || l.open.Load() != 2 {
		t.Fatalf("after one close and a third accept: %d slots, %d open", len(l.slots), l.open.Load())
	}
	second.Close()
	third.Close()
	for range 2 { // fill the cap again, so the next Accept waits for a slot
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		defer (<-accepted).Close()
	}
	l.Close()
	if err := <-ended; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}

// TestDrainDeadline_LeavesTheLeaveItsShare: the HTTP server's drain ends a
// quarter of the stop's time (at most 5 s) before the stop's deadline, so
// a drain held up to its end still leaves a cluster's node time to
// resign and revoke its lease (found by review: the leave got an expired
// context).
func TestDrainDeadline_LeavesTheLeaveItsShare(t *testing.T) {
	for _, c := range []struct{ timeout, reserve time.Duration }{{4 * time.Second, time.Second}, {time.Minute, 5 * time.Second}} {
		stop, cancel := context.WithTimeout(context.Background(), c.timeout)
		drain, cancelDrain := drainDeadline(stop)
		d, _ := stop.Deadline()
		dd, _ := drain.Deadline()
		if gap := d.Sub(dd); gap <= c.reserve/2 || gap > c.reserve {
			t.Errorf("timeout %v: the drain ends %v before the stop, want about %v", c.timeout, gap, c.reserve)
		}
		cancelDrain()
		cancel()
	}
}

// TestReview_ALimitedConnectionHalfCloses: net/http half-closes a
// connection (closeWriteAndWait: its answer, then a FIN) before it drops
// one whose request body it did not read whole (a 413, a produce cut 503
// busy or 408 body_too_slow), so the client reads the answer before the
// reset its unread bytes cause. It does so only for a connection with
// CloseWrite, which the --max-connections wrapper hid.
func TestReview_ALimitedConnectionHalfCloses(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 1, prometheus.NewRegistry())
	defer l.Close()
	client, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("an accepted %T has no CloseWrite", c)
	}
	fmt.Fprint(c, "answer")
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(client); err != nil || string(b) != "answer" {
		t.Fatalf("the client read %q, %v; want the answer, then EOF", b, err)
	}
}
