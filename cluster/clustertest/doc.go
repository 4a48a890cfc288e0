// Package clustertest tests package cluster against a real etcd: an
// embedded etcd server (go.etcd.io/etcd/server/v3/embed) on a Unix socket
// in a temporary directory, never a mock of the client. It is a module of
// its own so the root module, which a broker embeds, never requires the
// etcd server.
package clustertest
