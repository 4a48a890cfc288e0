package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/narad-io/storage/server"
	"go.uber.org/zap"
)

// options are what a broker runs with (the flags, main.go).
type options struct {
	listen  string      // the broker's own server's address
	dataDir string      // the node's data directory
	etcd    string      // a cluster's etcd: host:port[,host:port...] or unix:///path; "": a node alone
	nodeID  string      // the node's id in the cluster ("": the stored one, or a new one)
	logger  *zap.Logger // nil: none
}

// broker is a program that embeds a whole node (server.Server) and
// serves it itself: one http.ServeMux holds the node's HTTP API and the
// broker's own routes (routes.go), and its own http.Server serves them.
//
// Its life is start, then close: close shuts the broker's server down
// (its long polls ended at once by the node's EndLongPolls, registered
// for the shutdown) before it closes the node, so no request is in a
// node that closes.
type broker struct {
	node   *server.Server
	http   *http.Server
	url    string     // http://host:port, where clients and the other nodes reach it
	served chan error // the server's Serve's end, once
}

// startBroker opens the node, serves it and starts it, and returns once
// the node is ready (a cluster's node: registered); ctx bounds the start.
func startBroker(ctx context.Context, opts options) (*broker, error) {
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return nil, err
	}
	b := &broker{url: "http://" + ln.Addr().String(), served: make(chan error, 1)}
	cfg := server.DefaultConfig()
	cfg.DataDir = opts.dataDir
	cfg.Listen = "" // the broker serves the API on its own server
	cfg.Logger = opts.logger
	if opts.etcd != "" {
		cfg.Metastore = metastore(opts.etcd)
		cfg.NodeID = opts.nodeID
		cfg.AdvertiseAddr = b.url // the other nodes' moves and the 421s name the broker's server
	}
	if b.node, err = server.New(ctx, cfg); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", b.node.Handler()) // /v1/..., /healthz, /readyz, /metrics
	b.routes(mux)
	b.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	b.http.RegisterOnShutdown(b.node.EndLongPolls)
	go func() { b.served <- b.http.Serve(ln) }()
	// Served before Start: a cluster's node is registered during Start,
	// and the others may call it from then on (the API answers 503
	// not_ready until the node is ready).
	if err := b.node.Start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("start the node: %w", err), b.close())
	}
	return b, nil
}

// metastore is server.Config's Metastore for the -etcd flag's endpoints.
func metastore(etcd string) string {
	if path, ok := strings.CutPrefix(etcd, "unix://"); ok {
		return "etcd+unix://" + path
	}
	return "etcd://" + etcd
}

// close shuts the broker's server down, then closes the node (it leaves
// the cluster, closes every log).
func (b *broker) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := b.http.Shutdown(ctx)
	if served := <-b.served; !errors.Is(served, http.ErrServerClosed) {
		err = errors.Join(err, served)
	}
	return errors.Join(err, b.node.Close())
}
