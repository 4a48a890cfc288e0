package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
)

// fakeProduceServer decodes the binary batch of each produce and keeps
// its values as "committed", whatever happens to the client meanwhile
// (as the daemon does once a batch reached the partition's mailbox).
type fakeProduceServer struct {
	mu        sync.Mutex
	values    [][]byte
	bodySizes []int
	// before, if set, runs after the body is read and before the commit.
	before func(r *http.Request)
}

func (f *fakeProduceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.bodySizes = append(f.bodySizes, len(body))
	f.mu.Unlock()
	if len(body) > 64<<20 { // the daemon's maxBatchBytes (roughly: it counts envelopes)
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		fmt.Fprint(w, `{"error":{"code":"batch_too_large","message":"over 64 MiB"}}`)
		return
	}
	br := bufio.NewReader(bytes.NewReader(body))
	var vals [][]byte
	for {
		kl, err := binary.ReadUvarint(br)
		if err == io.EOF {
			break
		}
		io.CopyN(io.Discard, br, int64(kl))
		vl, _ := binary.ReadUvarint(br)
		v := make([]byte, vl)
		io.ReadFull(br, v)
		vals = append(vals, v)
	}
	if f.before != nil {
		f.before(r)
	}
	f.mu.Lock()
	base := len(f.values)
	f.values = append(f.values, vals...)
	f.mu.Unlock()
	fmt.Fprintf(w, `{"base_offset":%d,"count":%d,"high_watermark":%d}`, base, len(vals), base+len(vals))
}

// TestProduce_KeepsExactBytesOfALine: a line's value is every byte before
// its newline, a \r included (found by review: bufio.ScanLines dropped it).
func TestProduce_KeepsExactBytesOfALine(t *testing.T) {
	f := &fakeProduceServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	var out, errb bytes.Buffer
	code := runProduce([]string{"--addr", srv.URL, "--topic", "t"}, strings.NewReader("a\r\nb\r"), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := []string{"a\r", "b\r"}
	var got []string
	for _, v := range f.values {
		got = append(got, string(v))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %q, want %q (each line's exact bytes without its \\n)", got, want)
	}
}

// TestProduce_ByteCapKeepsRequestsUnderTheBound: a line that would take a
// batch past the cap goes in the next request (found by review: a batch
// under 16 MiB plus one large line made a request over the daemon's bound).
func TestProduce_ByteCapKeepsRequestsUnderTheBound(t *testing.T) {
	f := &fakeProduceServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := producer{c: c, topic: "t", stdout: io.Discard}
	lines := make(chan []byte, 2)
	lines <- bytes.Repeat([]byte{'a'}, maxBatchSendBytes-1)
	lines <- bytes.Repeat([]byte{'b'}, 49<<20)
	close(lines)
	err = p.run(context.Background(), lines, 1000, time.Hour)
	t.Logf("request body sizes: %v", f.bodySizes)
	if err != nil {
		t.Errorf("run: %v (each line alone fits in one request)", err)
	}
	for _, n := range f.bodySizes {
		if n > 64<<20 {
			t.Errorf("a request of %d bytes, over the daemon's 64 MiB bound", n)
		}
	}
}

// TestProduce_AnInterruptWaitsForTheBatchOnItsWay: an interrupt while a
// batch is sent does not abandon it (the daemon would commit it anyway):
// the summary counts what was committed (found by review: it said 0 while
// the server committed 3).
func TestProduce_AnInterruptWaitsForTheBatchOnItsWay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeProduceServer{}
	f.before = func(*http.Request) { cancel() } // the operator's ^C, while the commit is under way
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p := producer{c: c, topic: "t", stdout: &out}
	lines := make(chan []byte, 3)
	for _, s := range []string{"x", "y", "z"} {
		lines <- []byte(s)
	}
	close(lines)
	p.run(ctx, lines, 3, time.Hour)
	p.summary()
	srv.Close() // waits for the handler: the commit is done
	f.mu.Lock()
	committed := len(f.values)
	f.mu.Unlock()
	if int64(committed) != p.records || !strings.Contains(out.String(), "produced 3 records") {
		t.Fatalf("the summary %q counts %d records; the server committed %d", out.String(), p.records, committed)
	}
}

// TestConsume_StopsWhenASkipDoesNotAdvance: a skip past damage or deleted
// records must move forward; one that does not is an error, not a spin
// (found by review).
func TestConsume_StopsWhenASkipDoesNotAdvance(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"record_unreadable", `{"error":{"code":"record_unreadable","message":"m"},"next_offset":%d}`},
		{"offset_deleted", `{"error":{"code":"offset_deleted","message":"m"},"start_offset":%d}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			srv := httptest.NewServer(oneTopic(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) > 200 { // end the spin so the test ends
					w.WriteHeader(http.StatusInternalServerError)
					fmt.Fprint(w, `{"error":{"code":"internal","message":"stop"}}`)
					return
				}
				off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
				w.WriteHeader(http.StatusGone)
				fmt.Fprintf(w, tc.body, off) // the same offset: no progress
			}))
			defer srv.Close()
			var out, errb bytes.Buffer
			code := runConsume([]string{"--addr", srv.URL, "--topic", "t", "--from", "5", "--skip-damaged"}, &out, &errb)
			skipped := strings.Count(errb.String(), "skipped")
			if code != 1 || skipped > 0 || n.Load() > 1 {
				t.Errorf("exit %d after %d requests, %d \"skipped\" lines: a skip that does not advance loops", code, n.Load(), skipped)
			}
			if n.Load() > 2 {
				t.Errorf("%d fetches of offset 5: a skip that does not advance loops", n.Load())
			}
		})
	}
}

// TestConsume_ADamagedFrameStopsAReplayUnlessSkipped: a replay meeting a
// damaged frame exits 1 naming its offsets and where to resume; with
// --skip-damaged it steps over them, says so, and goes on.
func TestConsume_ADamagedFrameStopsAReplayUnlessSkipped(t *testing.T) {
	srv := httptest.NewServer(oneTopic(func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
		if off < 4 {
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, `{"error":{"code":"record_unreadable","message":"m"},"next_offset":4}`)
			return
		}
		w.Header().Set("Content-Type", e2etest.BatchContentType)
		w.Header().Set("Narad-Next-Offset", "5")
		w.Header().Set("Narad-High-Watermark", "5")
		var b []byte
		b = binary.BigEndian.AppendUint64(b, 4)
		b = binary.BigEndian.AppendUint64(b, 0)
		b = binary.AppendUvarint(b, 0)
		b = binary.AppendUvarint(b, 1)
		b = append(b, 'v')
		w.Write(b)
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	if code := runConsume([]string{"--addr", srv.URL, "--topic", "t"}, &out, &errb); code != 1 || out.Len() != 0 || !strings.Contains(errb.String(), "partition 0: offsets 0..3 are in a damaged frame; --skip-damaged") {
		t.Fatalf("without --skip-damaged: exit %d, %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := runConsume([]string{"--addr", srv.URL, "--topic", "t", "--skip-damaged"}, &out, &errb); code != 0 || out.String() != "0\t4\t\tv\n" || !strings.Contains(errb.String(), "skipped") {
		t.Fatalf("with --skip-damaged: exit %d, %q %q", code, out.String(), errb.String())
	}
}

// oneTopic serves topic t's description, of one partition, and hands
// every other request to fetch.
func oneTopic(fetch http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/topics/t" {
			fmt.Fprint(w, `{"name":"t","incarnation":"00000000000000a1","partitions":[{"partition":0}]}`)
			return
		}
		fetch(w, r)
	})
}
