// Package e2etest is the plumbing the end-to-end tests share: those of the
// node in process (package server), of the process (cmd/narad-storaged),
// of a cluster (cluster/clustertest) and of the offline tools (tool). It
// owns requests to a node's HTTP API and their answers, decoded with the
// tests' own types as docs/http-api.md gives them, never the server's (a
// renamed field fails a test); the scrape of a /metrics exposition; a
// client's transport that counts its fetches and tells of its topic-wide
// waits as they go out (Requests); a self-signed certificate written to
// files; and the data fixtures several tests build alike. It holds no assertion of a test: each test keeps its
// own, and these helpers fail a test only where its setup did not go
// through.
package e2etest
