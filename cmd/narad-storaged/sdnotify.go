package main

import (
	"net"
	"os"
)

// sdNotify tells systemd (a Type=notify unit) the daemon's state: READY=1
// once it serves every partition, STOPPING=1 when it begins to shut down.
// Without NOTIFY_SOCKET (not under systemd) it does nothing. The protocol
// is one datagram on a unix socket; an abstract socket's name starts with
// '@'.
func sdNotify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state))
	return err
}
