// Package client is the Go client of narad-storaged's HTTP API
// (docs/http-api.md): topics, produce, fetch with long polls, acks and
// consumer state.
//
// Every call takes a context. Records travel in the binary batch encoding
// by default, so keys and values are exact bytes; Produce can send JSON
// text or base64 instead (WithEncoding). An error answer is an *Error
// carrying the API's code; errors.Is matches it against the sentinels
// (ErrTopicNotFound, ErrOffsetDeleted, ...). An answer that says the node
// did nothing is retried, with backoff, up to Options.Retries times: 503
// busy (no open-log slot or descriptor free) for any call, 503
// commit_failed for a produce. Connections are kept alive and reused.
//
// The package depends on nothing of the engine: a program that talks to a
// daemon does not build the storage engine.
package client
