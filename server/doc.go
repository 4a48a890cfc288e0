// Package server is the node a broker embeds whole: a runtime.Node, its
// HTTP API (docs/http-api.md) and, when its metastore is a cluster's
// etcd, its place in the cluster (a cluster.Participant: identity,
// membership, the assigner, the mover) with the HTTP side of it: 421
// answers to another node's partitions, the moves API, and the internal
// move endpoints with the cluster.Transfer that calls them on other nodes.
// narad-storaged is flags, signals and systemd around it.
//
//	s, err := server.New(ctx, cfg) // cfg from server.DefaultConfig()
//	...
//	mux.Handle("/", s.Handler())   // or cfg.Listen: the package's own server
//	err = s.Start(ctx)             // returns once ready
//	...
//	s.Close()
//
// With a Listen address the server serves the API itself, with the
// limits docs/http-api.md names (connections, header bytes, unauthenticated
// connections, read and write deadlines, HTTP/2 streams). A program that
// serves Handler itself brings its own http.Server and its limits (a
// WriteTimeout, if it sets one, above the longest long poll, 60 s), and
// shuts it down before Close; the API's own bounds (bodies, produce bytes
// and answers in flight, what a request may ask for) hold either way.
//
// The handlers are package httpapi's; this package opens the node and its
// listener, serves the handlers with its own http.Server, and closes it
// all in order. Files: config.go (Config), server.go (the life of a
// node), listener.go (the connection cap), tls.go, cluster.go (a cluster's
// node's etcd endpoints, advertised address and peer TLS), descriptors.go,
// diskcheck.go (the disk check at start, and CheckDisk for the command).
package server
