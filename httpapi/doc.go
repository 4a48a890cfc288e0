// Package httpapi is the HTTP API of docs/http-api.md over a
// runtime.Node: Handler routes every endpoint, checks the bearer token,
// holds a request to the bounds package api names and to its Options
// (bodies, produce bytes and records answers in flight), streams records
// answers, and, on a cluster's node, answers 421 for another node's
// partition, fenced readiness, the moves API and the internal move
// endpoints a new owner pulls a partition through. Transfer is the
// calling side of those endpoints (cluster.Transfer over HTTP). The
// bodies, codes and batch codec are package api's, shared with client.
//
// A program serves Handler with any http.Server; package server serves it
// with its own, whose connections ConnContext and
// ConnContextWithAuthDeadline mark so that a connection that never
// authenticated is closed after its first answer.
//
// Files: handler.go (routing, authentication, readiness, the error
// body), one file a resource (topics.go, records.go, consumer.go,
// queue.go, cursors.go, moves.go), queue_batch.go (a queue consume's
// binary answer), owner.go (421 routing), stream.go
// (records answers streamed from lending reads), body.go (metered
// produce bodies), input.go (exact input: query parameters and JSON
// fields), errors.go (engine errors to answers), metrics.go, conns.go,
// transfer.go.
package httpapi
