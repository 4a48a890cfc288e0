package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/narad-io/storage/partition"
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

// TestConns_ASilentUnauthenticatedConnectionIsClosed: with a token, a
// connection that sends nothing is closed once unauthenticatedFor has
// passed, whatever the protocol's own timeouts (found by review: HTTP/2
// kept one for the idle timeout).
func TestConns_ASilentUnauthenticatedConnectionIsClosed(t *testing.T) {
	defer func(d time.Duration) { unauthenticatedFor = d }(unauthenticatedFor)
	unauthenticatedFor = 50 * time.Millisecond
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ConnContext = withConnAuthDeadline
	srv.Start()
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("a silent connection read %d bytes, %v; want it closed", n, err)
	}
}

// TestRecordStream_AClientThatStopsReadingIsCut: an answer whose client
// accepts nothing for answerStall is cut, and the handler returns (its
// answer budget given back), not at the server's write timeout (found by
// review: sixteen stalled 64 MiB fetches blocked every read for five
// minutes).
func TestRecordStream_AClientThatStopsReadingIsCut(t *testing.T) {
	defer func(d time.Duration) { answerStall = d }(answerStall)
	answerStall = 100 * time.Millisecond
	node, a := reviewNode(t, apiOptions{})
	for range 16 {
		if _, err := node.Produce(context.Background(), "t", 0, []partition.Record{{Value: make([]byte, 1<<20)}}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		a.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/topics/t/partitions/0/records?offset=0&max_bytes=%d HTTP/1.1\r\nHost: x\r\n\r\n", maxFetchBytes)
	<-done // never read: the answer is cut
	if held := a.answerBytes.Load(); held != 0 {
		t.Fatalf("%d bytes of the answer budget held after the cut", held)
	}
}
