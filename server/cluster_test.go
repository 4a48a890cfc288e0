package server

import (
	"net"
	"strings"
	"testing"
)

// TestAdvertised_NamesOneHostAndTheSchemeServed: the advertised address
// is the flag's (host:port given the scheme served) or the listening
// address, never a wildcard, and never another scheme than the one
// served.
func TestAdvertised_NamesOneHostAndTheSchemeServed(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7480}
	wildcard := &net.TCPAddr{IP: net.IPv4zero, Port: 7480}
	for _, tc := range []struct {
		flag, scheme string
		listening    net.Addr
		want, err    string
	}{
		{"", "http", loop, "http://127.0.0.1:7480", ""},
		{"", "https", loop, "https://127.0.0.1:7480", ""},
		{"", "http", wildcard, "", "advertise-addr"},
		{"node-a.internal:7480", "http", wildcard, "http://node-a.internal:7480", ""},
		{"https://node-a.internal:7480/", "https", wildcard, "https://node-a.internal:7480", ""},
		{"http://node-a.internal:7480", "https", wildcard, "", "serves https"},
		{"http://node-a.internal:7480/x", "http", wildcard, "", "want host:port"},
	} {
		got, err := advertised(tc.flag, tc.scheme, tc.listening)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("%q over %s on %v: %q, %v; want an error saying %q", tc.flag, tc.scheme, tc.listening, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Fatalf("%q over %s on %v: %q, %v; want %q", tc.flag, tc.scheme, tc.listening, got, err, tc.want)
		}
	}
}
