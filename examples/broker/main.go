// Command narad-broker-example is a small broker, in a module of its own,
// that embeds a whole node (package server) the way a broker would: it
// mounts the node's HTTP API on its own http.ServeMux next to a route of
// its own (GET /broker/partitions: what this node owns, asked of the node
// itself), serves both with its own http.Server, and, given etcd
// endpoints, joins a cluster; alone otherwise.
//
//	go run .                         # a short self-demonstration, then exit 0 (CI runs it)
//	go run . -data-dir ./data        # a node alone on 127.0.0.1:7480, until SIGINT or SIGTERM
//	go run . -etcd 127.0.0.1:2379 -node-id a -listen 127.0.0.1:7481 -data-dir ./a
//
// Its test starts an embedded etcd and two brokers in one process, and
// checks they form one cluster whose partitions either serves.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

func main() {
	var opts options
	flag.StringVar(&opts.listen, "listen", "127.0.0.1:7480", "address of the broker's own server")
	flag.StringVar(&opts.dataDir, "data-dir", "./narad-broker-data", "the node's data directory")
	flag.StringVar(&opts.etcd, "etcd", "", "a cluster's etcd endpoints, host:port[,host:port...] or unix:///path; none: a node alone")
	flag.StringVar(&opts.nodeID, "node-id", "", "the node's id in the cluster (default: the stored one, or a new one)")
	flag.Parse()
	var err error
	if flag.NFlag() == 0 {
		err = demo(context.Background(), os.Stdout)
	} else {
		err = serve(opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "narad-broker-example:", err)
		os.Exit(1)
	}
}

// serve runs the broker until SIGINT or SIGTERM, logging to stderr.
func serve(opts options) error {
	logger, err := zap.NewProduction()
	if err != nil {
		return err
	}
	defer logger.Sync()
	opts.logger = logger
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b, err := startBroker(ctx, opts)
	if err != nil {
		return err
	}
	logger.Info("broker serving", zap.String("url", b.url))
	select {
	case <-ctx.Done():
	case err := <-b.served: // it ended other than by a shutdown: close reports it
		b.served <- err
	}
	return b.close()
}
