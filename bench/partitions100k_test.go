package bench

import (
	"testing"
)

// BenchmarkDaemonManyPartitions runs RunManyPartitions once: 32 clients,
// one topic, one record produced to each partition and read back, at
// 2,000 partitions inside the daemon's default open-log budget and at
// 100,000 past it, in one run; then the daemon's stop, its ready after a
// clean stop and after a crash, its resident set per closed and per open
// partition, and the metastore's size and change time at each count
// (docs/scaling.md, "Partitions per node"). It builds narad-storaged from
// this repository and takes several minutes:
//
//	cd bench && go test -run '^$' -bench DaemonManyPartitions -benchtime 1x -timeout 2h
func BenchmarkDaemonManyPartitions(b *testing.B) {
	bin, err := BuildDaemon(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		r, err := RunManyPartitions(bin, b.TempDir(), 2000, 100000, 32)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%+v", r)
		b.ReportMetric(float64(r.Budget), "budget")
		b.ReportMetric(r.Inside.ProducesPerS, "inside_produces/s")
		b.ReportMetric(r.Inside.ReadsPerS, "inside_reads/s")
		b.ReportMetric(r.Past.ProducesPerS, "past_produces/s")
		b.ReportMetric(r.Past.ReadsPerS, "past_reads/s")
		b.ReportMetric(r.Ratios.Produce, "produce_x_inside")
		b.ReportMetric(r.Ratios.Read, "read_x_inside")
		b.ReportMetric(r.Past.ProduceP99Ms, "past_produce_p99_ms")
		b.ReportMetric(r.Startup.ReadyCleanSecs, "ready_clean_s")
		b.ReportMetric(r.Startup.ReadyCrashSecs, "ready_crash_s")
		b.ReportMetric(r.Memory.PerClosedPartition, "rss_B/closed_partition")
		b.ReportMetric(r.Memory.PerOpenPartition, "rss_B/open_partition")
		b.ReportMetric(float64(r.Meta.PastBytes), "metastore_B")
		b.ReportMetric(r.Meta.PastWriteMs, "metastore_change_ms")
	}
}
