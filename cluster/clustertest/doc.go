// Package clustertest tests package cluster against a real etcd: an
// embedded etcd server (go.etcd.io/etcd/server/v3/embed) on a Unix socket
// in a temporary directory, never a mock of the client. It is a module of
// its own so the root module, which a broker embeds, never requires the
// etcd server.
//
// Its cluster tests (TestCluster_*) run whole nodes on that etcd in the
// test's process, each a server.Server on its own loopback listener and
// data directory (nodes_test.go), waiting on the lines each logs; goleak
// sees every goroutine they leave. A test runs the narad-storaged binary
// (daemons_test.go) only for what needs a process: a node killed, the
// exit code of a refused start, the move command.
package clustertest
