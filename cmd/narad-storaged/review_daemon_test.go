package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Tests of the daemon's hardening against hostile clients, found by
// review.

// tokenServer serves a with the daemon's connection settings: each
// connection's authentication state in its requests' context, OPTIONS *
// to the API.
func tokenServer(t *testing.T, a http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(a)
	srv.Config.ConnContext = withConnAuth
	srv.Config.DisableGeneralOptionsHandler = true
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestReview_AnUnauthenticatedOddRequestClosesItsConnection: a daemon
// with a token keeps no connection alive that never authenticated,
// whatever it asked. OPTIONS *, a CONNECT and an uncleaned path were
// answered 400 before the token was looked at, without closing: a client
// without the token held a connection (and its slot under
// --max-connections) for as long as it sent one of them within the idle
// timeout.
func TestReview_AnUnauthenticatedOddRequestClosesItsConnection(t *testing.T) {
	a := newAPI(nil, nil, zap.NewNop(), prometheus.NewRegistry(), apiOptions{token: []byte("tok"), maxBody: 1 << 20})
	srv := tokenServer(t, a)
	for _, request := range []string{
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT x:1 HTTP/1.1\r\nHost: x:1\r\n\r\n",
		"GET //v1/topics HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/topics/../topics HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(c, request)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatalf("%q: %v", request, err)
		}
		if resp.StatusCode != http.StatusBadRequest || !resp.Close {
			t.Errorf("%q without the token: %d, close %v; want 400 and the connection closed", request, resp.StatusCode, resp.Close)
		}
	}
}
