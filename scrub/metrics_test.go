package scrub

import (
	"context"
	"testing"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestProgressMetrics: a stopped pass shows a partition part way; a whole
// pass shows it done, with its completion time, and sets the node's
// oldest completion.
func TestProgressMetrics(t *testing.T) {
	d := sim.NewDisk(10)
	seed(t, d, 0, 400)
	ctx, cancel := context.WithCancel(bg)
	node := &fakeNode{fs: d, onSave: func(n int) {
		if n == 2 {
			cancel()
		}
	}}
	s, _ := newScrubber(d, node, 1<<30)
	s.metrics = newMetrics(prometheus.NewRegistry(), false)
	s.Pass(ctx, nil, nil)
	cancel()
	part := testutil.ToFloat64(s.metrics.progress.WithLabelValues("orders", "0"))
	if part <= 0 || part >= 1 {
		t.Fatalf("progress of a stopped pass: %v, want between 0 and 1", part)
	}
	if got := testutil.ToFloat64(s.metrics.oldest); got != 0 {
		t.Fatalf("oldest completion before any whole pass: %v", got)
	}
	node.onSave = nil
	s.Pass(bg, nil, nil)
	if got := testutil.ToFloat64(s.metrics.progress.WithLabelValues("orders", "0")); got != 1 {
		t.Fatalf("progress after a whole pass: %v", got)
	}
	done := testutil.ToFloat64(s.metrics.done.WithLabelValues("orders", "0"))
	if done == 0 || testutil.ToFloat64(s.metrics.oldest) != done {
		t.Fatalf("completion %v, node's oldest %v", done, testutil.ToFloat64(s.metrics.oldest))
	}
}

// TestMetricsByTopic: with metrics by topic, the gauges are one series a
// topic (the least progress, the oldest completion), none a partition.
func TestMetricsByTopic(t *testing.T) {
	d := sim.NewDisk(11)
	seed(t, d, 0, 400)
	seed(t, d, 1, 400)
	reg := prometheus.NewRegistry()
	s, _ := newScrubber(d, &fakeNode{fs: d}, 1<<30)
	s.metrics = newMetrics(reg, true)
	s.Pass(bg, nil, nil)
	if n := testutil.CollectAndCount(s.metrics.done); n != 1 {
		t.Fatalf("%d completion series, want 1 (the topic)", n)
	}
	if got := testutil.ToFloat64(s.metrics.done.WithLabelValues("orders")); got == 0 {
		t.Fatal("no completion for the topic")
	}
	if got := testutil.ToFloat64(s.metrics.progress.WithLabelValues("orders")); got != 1 {
		t.Fatalf("topic progress %v, want 1", got)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "partition" {
					t.Fatalf("%s has a partition label with metrics by topic", f.GetName())
				}
			}
		}
	}
}
