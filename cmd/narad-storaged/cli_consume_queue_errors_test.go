package main

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer written by the command and read by the
// test while the command runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestConsumeQueue_AnOwnerThatKeepsFailingIsSaid: consume --queue without
// --follow, while the second owner refuses every consume (429
// too_many_leased: another consumer holds its partition's lease bound),
// says so on stderr while it retries; before the drain, a consume --queue
// that met an error said it and exited 1. Once the owner answers, the
// drain ends, exit 0, everything printed and acked.
func TestConsumeQueue_AnOwnerThatKeepsFailingIsSaid(t *testing.T) {
	f := newFakeQueueCluster(t)
	f.append(0, "a")
	f.append(2, "c")
	failing := true
	refused := 0
	third := make(chan struct{})
	f.refuse = func(node int, w http.ResponseWriter) bool {
		if node != 1 || !failing {
			return false
		}
		if refused++; refused == 3 {
			close(third) // the client has handled the first two refusals
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":{"code":"too_many_leased","message":"the partitions this consume may lease from each hold 10000 leased records"}}`))
		return true
	}
	var out bytes.Buffer
	var errb lockedBuffer
	code := make(chan int)
	go func() {
		code <- runConsume([]string{"--addr", f.nodes[0].URL, "--topic", "q", "--queue"}, &out, &errb)
	}()
	<-third
	said := errb.String()
	f.mu.Lock()
	failing = false
	f.mu.Unlock()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d once the owner answered: %s", c, errb.String())
	}
	if !strings.Contains(said, "too_many_leased") && !strings.Contains(said, "leased records") {
		t.Errorf("after two refused consumes of an owner, stderr said %q: nothing of why the drain does not end", said)
	}
	if got := sortedLines(out.String()); !slices.Equal(got, []string{"0\t0\t\ta", "2\t0\t\tc"}) || len(f.unacked()) != 0 {
		t.Fatalf("printed %q, not acked %v", got, f.unacked())
	}
}

// TestConsumeQueue_AnOwnerThatNeverAnswersEndsTheDrain: consume --queue
// without --follow, while the second owner refuses every consume: once
// drainFailures of them failed in a row it exits 1, saying which owner
// and why; what it printed of the first owner's is acked (how much
// depends on the two owners' pace), the rest not. Before, it retried for
// ever.
func TestConsumeQueue_AnOwnerThatNeverAnswersEndsTheDrain(t *testing.T) {
	defer func(n int) { drainFailures = n }(drainFailures)
	drainFailures = 3
	f := newFakeQueueCluster(t)
	f.append(0, "a")
	f.append(2, "c")
	f.refuse = func(node int, w http.ResponseWriter) bool {
		if node != 1 {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":{"code":"too_many_leased","message":"the partitions this consume may lease from each hold 10000 leased records"}}`))
		return true
	}
	var out, errb bytes.Buffer
	if code := runConsume([]string{"--addr", f.nodes[0].URL, "--topic", "q", "--queue"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d with an owner refusing every consume, want 1: %s", code, errb.String())
	}
	owner := strings.TrimPrefix(f.nodes[1].URL, "http://")
	if said := errb.String(); strings.Count(said, "(retrying)") != 2 || !strings.Contains(said, "node "+owner+": 3 consumes failed in a row") {
		t.Errorf("stderr said %q; want 2 retries and the end, naming node %s", said, owner)
	}
	printed := sortedLines(out.String())
	want := []string{"0/0", "2/0"}
	if slices.Equal(printed, []string{"0\t0\t\ta"}) {
		want = []string{"2/0"}
	} else if out.Len() != 0 {
		t.Fatalf("printed %q", printed)
	}
	if got := f.unacked(); !slices.Equal(got, want) {
		t.Fatalf("printed %q, not acked %v, want %v", printed, got, want)
	}
}
