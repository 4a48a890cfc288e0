package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/vfs"
)

// clientFlags are the flags of the commands that talk to a daemon.
type clientFlags struct {
	addr, topic, tokenFile, caFile string
	partition                      int
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:7480", "the daemon: host:port, http://host:port or https://host:port")
	fs.StringVar(&c.topic, "topic", "", "topic (required)")
	fs.IntVar(&c.partition, "partition", 0, "partition")
	fs.StringVar(&c.tokenFile, "auth-token-file", "", "file holding the bearer token, if the daemon needs one")
	fs.StringVar(&c.caFile, "tls-ca", "", "PEM file of the CA that signed the daemon's certificate (HTTPS; default: the system's roots)")
}

// client makes the client the flags describe.
func (c *clientFlags) client() (*client.Client, error) {
	if c.topic == "" {
		return nil, errors.New("--topic is required")
	}
	return c.anyClient()
}

// anyClient is client without a topic: for calls about no one topic.
func (c *clientFlags) anyClient() (*client.Client, error) {
	var opts client.Options
	if c.tokenFile != "" {
		b, err := vfs.ReadFile(vfs.OS{}, c.tokenFile, 4096)
		if err != nil {
			return nil, fmt.Errorf("auth token file: %w", err)
		}
		opts.Token = strings.TrimSpace(string(b))
	}
	if c.caFile != "" {
		pem, err := vfs.ReadFile(vfs.OS{}, c.caFile, 1<<20)
		if err != nil {
			return nil, fmt.Errorf("tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-ca %s: no PEM certificate in it", c.caFile)
		}
		opts.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return client.New(c.addr, opts)
}

// parseClientCommand parses a client command's flags; done is true when
// it should exit with code (help, or a usage error said on stderr).
func parseClientCommand(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	return 0, false
}
