package runtime

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BenchmarkScrape measures a /metrics scrape of a node whose one topic has
// n partitions, every one's boundary known (checked at a restart), with
// the per-partition gauges and summed per topic (MetricsByTopic): the
// bytes of the text exposition (bytes/scrape) and its time. Run with
// -benchtime 3x: each size builds its node once.
//
//	go test -run '^$' -bench Scrape -benchtime 3x ./runtime
func BenchmarkScrape(b *testing.B) {
	for _, parts := range []int{1_000, 10_000, 100_000} {
		for _, byTopic := range []bool{false, true} {
			b.Run(fmt.Sprintf("partitions=%d/by_topic=%v", parts, byTopic), func(b *testing.B) {
				reg := prometheus.NewRegistry()
				n := restartedNodeOf(b, parts, Config{Registerer: reg, MetricsByTopic: byTopic})
				defer n.Close()
				h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
				var size int
				b.ResetTimer()
				for range b.N {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
					size = w.Body.Len()
				}
				b.ReportMetric(float64(size), "bytes/scrape")
			})
		}
	}
}

// restartedNodeOf makes a topic of parts empty partitions on a simulated
// disk, stops the node and starts another with cfg, so every partition's
// boundary is known from the startup check.
func restartedNodeOf(b *testing.B, parts int, cfg Config) *Node {
	b.Helper()
	d := sim.NewDisk(1)
	if err := d.MkdirAll(dataDir); err != nil {
		b.Fatal(err)
	}
	start := func(cfg Config) *Node {
		ms, err := OpenLocalMetastore(d, dataDir)
		if err != nil {
			b.Fatal(err)
		}
		cfg.DataDir, cfg.FS, cfg.Metastore, cfg.MaxOpenLogs = dataDir, d, ms, 64
		n, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := n.Start(bg); err != nil {
			b.Fatal(err)
		}
		return n
	}
	first := start(Config{})
	if _, _, err := first.CreateTopic(bg, "orders", parts, Retention{}); err != nil {
		b.Fatal(err)
	}
	if err := first.Close(); err != nil {
		b.Fatal(err)
	}
	return start(cfg)
}
