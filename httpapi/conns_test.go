package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/narad-io/storage/partition"
)

// TestConns_ASilentUnauthenticatedConnectionIsClosed: with a token, a
// connection that sends nothing is closed once unauthenticatedFor has
// passed, whatever the protocol's own timeouts (found by review: HTTP/2
// kept one for the idle timeout).
func TestConns_ASilentUnauthenticatedConnectionIsClosed(t *testing.T) {
	defer func(d time.Duration) { unauthenticatedFor = d }(unauthenticatedFor)
	unauthenticatedFor = 50 * time.Millisecond
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ConnContext = ConnContextWithAuthDeadline
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
	node, a := reviewNode(t, Options{})
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
