package runtime

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/narad-io/storage/wire"
	"golang.org/x/sync/errgroup"
)

// BenchmarkNodeOpensPastTheBudget measures a node of one topic under an
// open-log budget of 5,000, on the real disk: 32 clients produce one
// record to each of up to 20,000 partitions, then read each back, the
// issue's workload. At 2,000 partitions every log is open (inside the
// budget: each produce a commit, each read a hit); at 20,000 and 100,000
// every produce and every read opens a log past the budget, which a
// victim's close makes room for. The partitions are laid out before the
// node starts (one record each, a clean stop's files, copied), so the
// setup costs no fsync. Each size reports produces and reads a second,
// and, past 2,000, each as a share of the 2,000's in the same run
// (docs/scaling.md, "Partitions per node"):
//
//	go test -run '^$' -bench NodeOpensPastTheBudget -benchtime 1x ./runtime
func BenchmarkNodeOpensPastTheBudget(b *testing.B) {
	const budget, clients, touched = 5000, 32, 20000
	var inBudget struct{ produce, read float64 }
	for _, partitions := range []int{2000, 20000, 100000} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			dir := b.TempDir()
			cfg := Config{DataDir: dir, MaxOpenLogs: budget, ColdWalkInterval: time.Hour}
			layOutSingleRecordPartitions(b, cfg, partitions)
			// The last partitions first: Start opened the first ones.
			order := make([]int, min(partitions, touched))
			for i := range order {
				order[i] = partitions - 1 - i
			}
			var produceSecs, readSecs float64
			for round := range b.N {
				b.StopTimer()
				n, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := n.Start(bg); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t0 := time.Now()
				eachOnce(b, clients, order, func(p int) error {
					_, err := n.Produce(bg, "wide", p, recs("wide", p, 1+round, 1))
					return err
				})
				t1 := time.Now()
				eachOnce(b, clients, order, func(p int) error {
					res, err := n.Read(bg, "wide", p, int64(1+round), 1, 1<<20)
					if err == nil && len(res.Records) != 1 {
						err = fmt.Errorf("partition %d: %d records read back, want 1", p, len(res.Records))
					}
					return err
				})
				produceSecs += t1.Sub(t0).Seconds()
				readSecs += time.Since(t1).Seconds()
				b.StopTimer()
				if err := n.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			ops := float64(len(order) * b.N)
			produce, read := ops/produceSecs, ops/readSecs
			b.ReportMetric(produce, "produces/s")
			b.ReportMetric(read, "reads/s")
			if partitions == 2000 {
				inBudget.produce, inBudget.read = produce, read
			} else if inBudget.produce > 0 {
				b.ReportMetric(produce/inBudget.produce, "produce_x_in_budget")
				b.ReportMetric(read/inBudget.read, "read_x_in_budget")
			}
		})
	}
}

// eachOnce runs fn on each of keys, from clients goroutines, retrying a
// call the budget found busy (as a client does).
func eachOnce(b *testing.B, clients int, keys []int, fn func(int) error) {
	b.Helper()
	var next atomic.Int64
	var g errgroup.Group
	for range clients {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(keys) {
					return nil
				}
				if err := retryBusy(func() error { return fn(keys[i]) }); err != nil {
					return err
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// layOutSingleRecordPartitions makes topic "wide" of the given
// partitions under cfg, each holding one record and the files a clean
// stop leaves: partition 0 is produced to and closed by a node, and its
// files are copied to every other partition's directory (without
// fsyncs: a benchmark's setup).
func layOutSingleRecordPartitions(b *testing.B, cfg Config, partitions int) {
	b.Helper()
	n, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		b.Fatal(err)
	}
	if _, _, err := n.CreateTopic(bg, "wide", partitions, Retention{}); err != nil {
		b.Fatal(err)
	}
	if _, err := n.Produce(bg, "wide", 0, recs("wide", 0, 0, 1)); err != nil {
		b.Fatal(err)
	}
	if err := n.Close(); err != nil {
		b.Fatal(err)
	}
	topicDir := filepath.Join(cfg.DataDir, wire.TopicsDirName, "wide")
	first, _ := wire.PartitionDirName(0)
	entries, err := os.ReadDir(filepath.Join(topicDir, first))
	if err != nil {
		b.Fatal(err)
	}
	var g errgroup.Group
	g.SetLimit(8)
	for p := 1; p < partitions; p++ {
		g.Go(func() error {
			name, _ := wire.PartitionDirName(p)
			to := filepath.Join(topicDir, name)
			if err := os.Mkdir(to, 0o755); err != nil {
				return err
			}
			for _, e := range entries {
				if err := copyFile(filepath.Join(topicDir, first, e.Name()), filepath.Join(to, e.Name())); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
