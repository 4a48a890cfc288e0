package scrub

import (
	"context"
	"errors"
	"testing"
	"time"

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

// assignErrNode is a fakeNode whose assignment cannot be read while err is
// set.
type assignErrNode struct {
	*fakeNode
	err error
}

func (n *assignErrNode) Assigned(ctx context.Context, topic string, p int) (bool, error) {
	if n.err != nil {
		return false, n.err
	}
	return n.fakeNode.Assigned(ctx, topic, p)
}

// TestAssignmentUnknownKeepsSeries: a whole pass during a metastore
// outage (Assigned fails) scrubs nothing, logs the failure once, and
// keeps every partition's series rather than forgetting them.
func TestAssignmentUnknownKeepsSeries(t *testing.T) {
	d := sim.NewDisk(39)
	seed(t, d, 0, 400)
	seed(t, d, 1, 400)
	node := &assignErrNode{fakeNode: &fakeNode{fs: d}}
	s, logs := newScrubber(d, node, 1<<30)
	s.metrics = newMetrics(prometheus.NewRegistry(), false)
	s.Pass(bg, nil, nil)
	if n := testutil.CollectAndCount(s.metrics.done); n != 2 {
		t.Fatalf("%d completion series after a whole pass, want 2", n)
	}
	node.err = errors.New("metastore unreachable")
	s.cfg.Interval = time.Nanosecond // due: only the assignment stops it
	reads := countReads(d)
	s.Pass(bg, nil, nil)
	d.SetHook(nil)
	if n := reads.of(partitionDir(0) + "/" + segmentName(0)); n != 0 {
		t.Fatalf("read %d bytes of a partition whose assignment is unknown", n)
	}
	if n := testutil.CollectAndCount(s.metrics.done); n != 2 {
		t.Fatalf("%d completion series after a pass with the assignment unknown, want 2", n)
	}
	if n := logs.FilterMessageSnippet("assignment unknown").Len(); n != 1 {
		t.Fatalf("%d warnings of the unknown assignment, want 1: %v", n, logs.All())
	}
}

// TestStoppedPassDoesNotKeepSeries: a pass stopped part way met partition
// 1, which is then deleted; the next whole pass does not meet it and
// drops its series: what a stopped pass met does not count for the next.
func TestStoppedPassDoesNotKeepSeries(t *testing.T) {
	d := sim.NewDisk(40)
	seed(t, d, 0, 400)
	seed(t, d, 1, 400)
	ctx, cancel := context.WithCancel(bg)
	node := &fakeNode{fs: d, onLook: func(p int) {
		if p == 1 {
			cancel()
		}
	}}
	s, _ := newScrubber(d, node, 1<<30)
	s.metrics = newMetrics(prometheus.NewRegistry(), false)
	s.Pass(ctx, nil, nil)
	cancel()
	if n := testutil.CollectAndCount(s.metrics.progress); n != 2 {
		t.Fatalf("%d progress series after a pass stopped in partition 1, want 2", n)
	}
	if err := d.RemoveAll(partitionDir(1)); err != nil {
		t.Fatal(err)
	}
	node.onLook = nil
	s.Pass(bg, nil, nil)
	if n := testutil.CollectAndCount(s.metrics.progress); n != 1 {
		t.Fatalf("%d progress series after a whole pass without partition 1, want 1", n)
	}
}

// TestDeletedTopicsSeriesGoAtNextPassStart: a topic deleted after a pass
// loses its series when the next pass starts, even one stopped at once,
// not only at the end of the next whole pass.
func TestDeletedTopicsSeriesGoAtNextPassStart(t *testing.T) {
	for _, byTopic := range []bool{false, true} {
		d := sim.NewDisk(41)
		seed(t, d, 0, 400)
		s, _ := newScrubber(d, &fakeNode{fs: d}, 1<<30)
		s.metrics = newMetrics(prometheus.NewRegistry(), byTopic)
		s.Pass(bg, nil, nil)
		if n := testutil.CollectAndCount(s.metrics.done); n != 1 {
			t.Fatalf("by topic %v: %d completion series, want 1", byTopic, n)
		}
		if err := d.RemoveAll(topicsDir + "/orders"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		cancel()
		s.Pass(ctx, nil, nil)
		if n, m := testutil.CollectAndCount(s.metrics.done), testutil.CollectAndCount(s.metrics.progress); n != 0 || m != 0 {
			t.Fatalf("by topic %v: %d completion and %d progress series of a deleted topic", byTopic, n, m)
		}
	}
}
