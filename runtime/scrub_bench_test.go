package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/scrub"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// BenchmarkScrubCost measures what the scrubber at its default rate
// costs produce and fetch on the real disk: one op is a one-record
// produce (a commit: an fdatasync) to one partition and a 100-record
// fetch from another, timed apart; ops alternate in phases of half a second between
// the scrubber off and the scrubber reading 64 MiB of sealed segments of
// closed partitions at scrub.DefaultRate, and at 8 times it (from the media: it drops their
// cached pages first). It reports each p99 with the scrubber on as a
// ratio of the p99 with it off, in the same run, and the rate the
// scrubber read at while it was on (docs/performance.md,
// "Scrubber"):
//
//	go test -run '^$' -bench ScrubCost -benchtime 20000x ./runtime
func BenchmarkScrubCost(b *testing.B) {
	for _, rate := range []int64{scrub.DefaultRate, 8 * scrub.DefaultRate} {
		b.Run(fmt.Sprintf("rate=%dMiB", rate>>20), func(b *testing.B) { benchmarkScrubCost(b, rate) })
	}
}

func benchmarkScrubCost(b *testing.B, rate int64) {
	n, err := New(Config{DataDir: b.TempDir(), SegmentMaxBytes: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	for _, topic := range []string{"cold", "hot"} {
		if _, _, err := n.CreateTopic(bg, topic, 4, Retention{}); err != nil {
			b.Fatal(err)
		}
	}
	value := []byte(strings.Repeat("x", 1000))
	for p := range 4 {
		for range 16 { // 16 MiB a partition, in 1 MiB segments
			batch := make([]partition.Record, 1000)
			for i := range batch {
				batch[i] = partition.Record{Value: value}
			}
			if _, err := n.Produce(bg, "cold", p, batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := n.Produce(bg, "hot", 1, recs("hot", 1, 0, 1000)); err != nil {
		b.Fatal(err)
	}
	n.EvictIdle(time.Now().Add(1000 * time.Hour)) // every log closed
	reg := prometheus.NewRegistry()
	cfg := n.scrubConfig()
	cfg.Rate, cfg.Registerer = rate, reg
	cfg.Interval = time.Nanosecond // every partition due at every pass: the passes below run back to back
	s := scrub.New(cfg)

	var stop context.CancelFunc
	var running sync.WaitGroup
	scrubOn := func() {
		ctx, cancel := context.WithCancel(bg)
		stop = cancel
		running.Go(func() {
			for ctx.Err() == nil {
				s.Pass(ctx, nil, nil)
			}
		})
	}
	scrubOff := func() {
		if stop != nil {
			stop()
			running.Wait()
			stop = nil
		}
	}
	defer scrubOff()

	const phase = 500 * time.Millisecond
	var produce, fetch [2][]time.Duration // [off, on]
	var onFor time.Duration
	on, switched := 0, time.Now()
	b.ResetTimer()
	for i := range b.N {
		if time.Since(switched) >= phase {
			if on = 1 - on; on == 1 {
				scrubOn()
			} else {
				scrubOff()
			}
			switched = time.Now()
		}
		t0 := time.Now()
		if _, err := n.Produce(bg, "hot", 0, recs("hot", 0, i, 1)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := n.Read(bg, "hot", 1, int64(i*37%900), 100, 1<<20); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if on == 1 {
			onFor += t2.Sub(t0)
		}
		produce[on] = append(produce[on], t1.Sub(t0))
		fetch[on] = append(fetch[on], t2.Sub(t1))
	}
	b.StopTimer()
	scrubOff()
	if len(produce[1]) == 0 {
		return // the first run, of one op: nothing to compare
	}
	p99 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)*99/100].Microseconds())
	}
	po, pn, fo, fn := p99(produce[0]), p99(produce[1]), p99(fetch[0]), p99(fetch[1])
	b.ReportMetric(po, "produce-p99-off-us")
	b.ReportMetric(pn, "produce-p99-on-us")
	b.ReportMetric(pn/po, "produce-p99-ratio")
	b.ReportMetric(fo, "fetch-p99-off-us")
	b.ReportMetric(fn, "fetch-p99-on-us")
	b.ReportMetric(fn/max(fo, 1), "fetch-p99-ratio")
	if read, err := testutil.GatherAndCount(reg, "narad_scrub_bytes_total"); err == nil && read == 1 {
		families, _ := reg.Gather()
		for _, f := range families {
			if f.GetName() == "narad_scrub_bytes_total" {
				b.ReportMetric(f.GetMetric()[0].GetCounter().GetValue()/onFor.Seconds()/(1<<20), "scrub-MiB/s")
			}
		}
	}
}
