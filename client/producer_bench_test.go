package client

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkProducer_Produce: records of 100 bytes without a key through
// a Producer to a node's real handler (httptest, loopback) over 16
// partitions, Close included: what a record costs end to end.
func BenchmarkProducer_Produce(b *testing.B) {
	n := startRealNode(b, nil, Options{})
	topic := fmt.Sprint("bench-", b.N)
	n.topic(b, topic, 16)
	values := make([][]byte, 1000)
	for i := range values {
		values[i] = fmt.Appendf(nil, "%09d %090d", i, 0)
	}
	ctx := context.Background()
	p, err := n.c.NewProducer(ctx, topic, ProducerOptions{BufferBytes: 128 << 20})
	if err != nil {
		b.Fatal(err)
	}
	failed := 0
	done := func(r Result) {
		if r.Err != nil {
			failed++ // results of a partition come from one goroutine, but not all: only read after Close
		}
	}
	b.SetBytes(100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := p.Produce(ctx, Record{Value: values[i%len(values)]}, done); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if st := p.Stats(); st.Acked != int64(b.N) {
		b.Fatalf("stats %+v after %d records", st, b.N)
	}
}
