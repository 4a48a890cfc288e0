package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
)

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
