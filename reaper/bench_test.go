package reaper

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// BenchmarkRestartSweep measures what the first sweep after a restart does
// to the readers of a live partition (docs/design.md, "Retention": a
// backlog of expired segments must not stall readers). Each iteration lays
// out 100 partitions of 100 small segments each (10,000 segments, every
// one a valid frame of 10 records, all last written two days ago) on the
// real file system, opens them as a restart does, then reads a live
// partition (1,000 committed records, no retention) one 10-record read
// after another: first with nothing else running (the baseline), then
// while the reaper's first pass sweeps all 10,000 segments away. Reported:
// read latency p50 and p99 of both phases, their ratios (sweep/baseline),
// and the sweep's wall time.
//
//	go test ./reaper -run '^$' -bench RestartSweep -benchtime 3x
func BenchmarkRestartSweep(b *testing.B) {
	const partitions, segmentsPer, recordsPer = 100, 100, 10
	var base, during []time.Duration
	var sweepTime time.Duration
	for range b.N {
		b.StopTimer()
		root := b.TempDir()
		files := vfs.OS{}
		layOut(b, root, partitions, segmentsPer, recordsPer)
		var targets []Target
		for p := range partitions {
			l, err := partition.Open(partitionIn(root, p), partition.Options{FS: files, RetentionMaxAge: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			targets = append(targets, Target{Topic: "expired", Partition: p, Log: l})
		}
		live, err := partition.Open(filepath.Join(root, "live", "p00000"), partition.Options{FS: files})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 100 {
			batch := make([]partition.Record, 10)
			for j := range batch {
				batch[j].Value = fmt.Appendf(nil, "%-100d", i*10+j)
			}
			if _, err := live.Produce(bg, batch); err != nil {
				b.Fatal(err)
			}
		}
		targets = append(targets, Target{Topic: "live", Partition: 0, Log: live})
		read := func(i int) time.Duration {
			started := time.Now()
			if _, err := live.Read(int64(i*10%1000), 10, 1<<20); err != nil {
				b.Fatal(err)
			}
			return time.Since(started)
		}
		for i := range 2000 { // warm the live partition's caches
			read(i)
		}
		for i := range 20000 {
			base = append(base, read(i))
		}

		b.StartTimer()
		r, loopConfig := newReaper(Config{}, func() []Target { return targets })
		loop := supervisor.StartLoop(loopConfig, r.pass)
		started := time.Now()
		loop.Trigger()
		for i := 0; testutil.ToFloat64(r.sweeps) < float64(len(targets)); i++ {
			during = append(during, read(i))
		}
		sweepTime += time.Since(started)
		b.StopTimer()
		if err := loop.Close(); err != nil {
			b.Fatal(err)
		}
		for _, t := range targets {
			if t.Topic == "expired" && t.Log.StartOffset() != segmentsPer*recordsPer {
				b.Fatalf("partition %d: start offset %d after the sweep", t.Partition, t.Log.StartOffset())
			}
			if err := t.Log.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	basePercentiles, duringPercentiles := percentiles(base), percentiles(during)
	b.ReportMetric(float64(basePercentiles[0].Nanoseconds()), "base-p50-ns")
	b.ReportMetric(float64(basePercentiles[1].Nanoseconds()), "base-p99-ns")
	b.ReportMetric(float64(duringPercentiles[0].Nanoseconds()), "sweep-p50-ns")
	b.ReportMetric(float64(duringPercentiles[1].Nanoseconds()), "sweep-p99-ns")
	b.ReportMetric(float64(duringPercentiles[0])/float64(basePercentiles[0]), "p50-ratio")
	b.ReportMetric(float64(duringPercentiles[1])/float64(basePercentiles[1]), "p99-ratio")
	b.ReportMetric(float64(len(during))/float64(b.N), "reads-during-sweep")
	b.ReportMetric(sweepTime.Seconds()*1e3/float64(b.N), "sweep-ms")
}

func percentiles(d []time.Duration) [2]time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return [2]time.Duration{}
	}
	return [2]time.Duration{s[len(s)*50/100], s[len(s)*99/100]}
}

func partitionIn(root string, p int) string {
	name, _ := wire.PartitionDirName(p)
	return filepath.Join(root, "expired", name)
}

// layOut writes the expired partitions directly: segmentsPer segments of
// one frame of recordsPer 100-byte records each, mtimes two days back.
// (A test file may use os: the seam test covers production code.)
func layOut(b *testing.B, root string, partitions, segmentsPer, recordsPer int) {
	b.Helper()
	old := time.Now().Add(-48 * time.Hour)
	for p := range partitions {
		dir := partitionIn(root, p)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		for s := range segmentsPer {
			first := int64(s * recordsPer)
			var payload []byte
			for i := range recordsPer {
				env, err := wire.AppendEnvelope(nil, nil, old.UnixMilli(), fmt.Appendf(nil, "%-100d", first+int64(i)))
				if err != nil {
					b.Fatal(err)
				}
				if payload, err = wire.AppendRecordFrame(payload, env); err != nil {
					b.Fatal(err)
				}
			}
			frame, err := wire.AppendFrame(nil, uint8(codec.None), first, recordsPer, len(payload), payload)
			if err != nil {
				b.Fatal(err)
			}
			name, _ := wire.SegmentFileName(first)
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, frame, 0o600); err != nil {
				b.Fatal(err)
			}
			if err := os.Chtimes(path, old, old); err != nil {
				b.Fatal(err)
			}
		}
	}
}
