package httpapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
)

// discardWriter is a ResponseWriter that keeps nothing: what a benchmark
// measures is the answer's reading and encoding, not a recorder's copy.
type discardWriter struct {
	header http.Header
	n      int
}

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

// SetWriteDeadline is a connection's, as the server's writer has it.
func (d *discardWriter) SetWriteDeadline(time.Time) error { return nil }

// builtAnswer is how a fetch's JSON answer was made before it was
// streamed: every record read into memory (Read), copied into strings,
// and the whole answer encoded at once. The benchmark's baseline.
func builtAnswer(w http.ResponseWriter, res partition.ReadResult) {
	out := api.FetchAnswer{Records: make([]api.Record, 0, len(res.Records)), NextOffset: res.Next, HighWatermark: res.HighWatermark}
	for _, r := range res.Records {
		fr := api.Record{Offset: r.Offset, CommittedAtMs: r.CommittedAtUnixMs}
		if utf8.Valid(r.Value) {
			fr.Value = string(r.Value)
		} else {
			fr.Value, fr.Encoding = base64.StdEncoding.EncodeToString(r.Value), "base64"
		}
		out.Records = append(out.Records, fr)
	}
	writeJSON(w, http.StatusOK, out)
}

// BenchmarkFetchAnswer: the answer of a JSON fetch of 1 and of 10,000
// records of 100 bytes (the read and the encoding: the rest of the
// handler is the same either way), streamed as the handler does against
// built whole as it did before. Quote the ratio of the two in one run:
//
//	go test -run '^$' -bench BenchmarkFetchAnswer -count 5 ./cmd/narad-storaged/
func BenchmarkFetchAnswer(b *testing.B) {
	ctx := context.Background()
	node, a := reviewNode(b, Options{})
	batch := make([]partition.Record, 10000)
	for i := range batch {
		batch[i] = partition.Record{Value: fmt.Appendf(nil, "%0100d", i)}
	}
	if _, err := node.Produce(ctx, "t", 0, batch); err != nil {
		b.Fatal(err)
	}
	for _, records := range []int{1, 10000} {
		b.Run(fmt.Sprintf("records=%d/streamed", records), func(b *testing.B) {
			for b.Loop() {
				w := &discardWriter{header: http.Header{}}
				s := newRecordStream(w, false, false, maxFetchBytes)
				sum, err := a.readInto(ctx, s, "t", 0, 0, records, maxFetchBytes, false)
				if err != nil || s.count != records {
					b.Fatalf("%d records, %v", s.count, err)
				}
				s.finish(s.last+1, sum.HighWatermark, boundaryJSON(s.last+1, sum.HighWatermark, "0123456789abcdef"))
				b.SetBytes(int64(w.n))
			}
		})
		b.Run(fmt.Sprintf("records=%d/built", records), func(b *testing.B) {
			for b.Loop() {
				res, err := node.Read(ctx, "t", 0, 0, records, maxFetchBytes)
				if err != nil || len(res.Records) != records {
					b.Fatalf("%d records, %v", len(res.Records), err)
				}
				w := &discardWriter{header: http.Header{}}
				builtAnswer(w, res)
				b.SetBytes(int64(w.n))
			}
		})
	}
}
