package clustertest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
)

// endpoint is a node of a test cluster as a test reaches it, whether it
// runs in this process (node) or as a daemon: its id, its data
// directory, its address and what it logged since it last started.
type endpoint struct {
	t       testing.TB
	id      string
	dataDir string
	addr    string // http(s)://127.0.0.1:port
	nodeLog
}

// peer is a node of a test cluster, in this process or a daemon.
type peer interface{ at() *endpoint }

func (e *endpoint) at() *endpoint { return e }

// client is a Go client of the cluster made with this node's address.
func (e *endpoint) client() *client.Client {
	e.t.Helper()
	c, err := client.New(e.addr, client.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// get sends a GET to the node itself, following nothing.
func (e *endpoint) get(path string) (int, []byte) {
	e.t.Helper()
	resp, err := http.Get(e.addr + path)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// waitApplied waits until the node's replica has applied topic's record
// of incarnation with an owner for each of its partitions (the debug
// line "topic record applied").
func (e *endpoint) waitApplied(topic, incarnation string, partitions int) {
	e.t.Helper()
	applied := func(line string) bool {
		var entry struct {
			Msg, Topic, Incarnation string
			Owned                   int `json:"partitions_with_owner"`
		}
		return json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "topic record applied" &&
			entry.Topic == topic && entry.Incarnation == incarnation && entry.Owned == partitions
	}
	if !e.waitLine(applied) {
		e.t.Fatalf("node %s never applied %s of incarnation %s with owners", e.id, topic, incarnation)
	}
}

// logWaitLimit bounds a wait for a log line: a wait that cannot end
// fails the test, never hangs it.
const logWaitLimit = time.Minute

// nodeLog is what a node logged since it last started, one JSON object a
// line (the daemon's log format, at debug), for a test to wait on: each
// line logged wakes every wait.
type nodeLog struct {
	mu     sync.Mutex
	lines  bytes.Buffer // under mu
	logged sync.Cond    // on mu: a line was logged, or the log ended
	ended  bool         // under mu: the node stopped, nothing more comes
}

// restart empties the log for a node starting (again).
func (l *nodeLog) restart() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged.L == nil { // set once, before anything waits
		l.logged.L = &l.mu
	}
	l.lines.Reset()
	l.ended = false
}

// Write takes whole lines (a zap core writes one entry a call).
func (l *nodeLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines.Write(p)
	l.logged.Broadcast()
	return len(p), nil
}

// end says the node stopped: a wait for a line not logged yet fails.
func (l *nodeLog) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	l.logged.Broadcast()
}

// waitLog waits until the node has logged a line holding text since it
// last started, and says whether it did before its log ended (or
// logWaitLimit passed).
func (l *nodeLog) waitLog(text string) bool { return l.waitLogCount(text, 1) }

// logCount counts the node's log lines holding text.
func (l *nodeLog) logCount(text string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.lines.String(), text)
}

// waitLogCount waits until the node has logged n lines holding text (as
// waitLog).
func (l *nodeLog) waitLogCount(text string, n int) bool {
	return l.waitUntil(func(log string) bool { return strings.Count(log, text) >= n })
}

// waitLine waits until the node has logged a line match accepts (as
// waitLog).
func (l *nodeLog) waitLine(match func(line string) bool) bool {
	return l.waitUntil(func(log string) bool {
		for _, line := range strings.Split(log, "\n") {
			if match(line) {
				return true
			}
		}
		return false
	})
}

// waitUntil waits until done holds of the whole log, re-checking at each
// line logged, and says whether it did before the log ended or
// logWaitLimit passed.
func (l *nodeLog) waitUntil(done func(log string) bool) bool {
	deadline := time.Now().Add(logWaitLimit)
	wake := time.AfterFunc(logWaitLimit, func() {
		l.mu.Lock()
		l.logged.Broadcast()
		l.mu.Unlock()
	})
	defer wake.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for !done(l.lines.String()) {
		if l.ended || !time.Now().Before(deadline) {
			return false
		}
		l.logged.Wait()
	}
	return true
}

func (l *nodeLog) log() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines.String()
}
