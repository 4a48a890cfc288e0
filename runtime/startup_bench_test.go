package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/narad-io/storage/wire"
	"golang.org/x/sync/errgroup"
)

// BenchmarkNodeStartPastTheBudget measures Start of a node of one topic
// of single-record partitions past an open-log budget of 500, on the real
// disk, with the cold walk on: after a clean stop (every boundary exact
// on disk), and after a crash (every hwm file empty, as a crash leaves a
// log that was open: each Start recovers every partition and writes its
// boundary, and the files are emptied again before the next). Compare
// the times at 2,000 and 20,000 partitions (docs/scaling.md, "Partitions
// per node"):
//
//	go test -run '^$' -bench NodeStartPastTheBudget -benchtime 3x ./runtime
func BenchmarkNodeStartPastTheBudget(b *testing.B) {
	const budget = 500
	for _, partitions := range []int{2000, 20000} {
		dir := b.TempDir()
		cfg := Config{DataDir: dir, MaxOpenLogs: budget, ColdWalkInterval: time.Hour}
		fillSingleRecordPartitions(b, cfg, partitions)
		for _, after := range []string{"clean", "crash"} {
			b.Run(fmt.Sprintf("after=%s/partitions=%d", after, partitions), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					if after == "crash" {
						emptyHWMFiles(b, dir, partitions)
					}
					b.StartTimer()
					n, err := New(cfg)
					if err != nil {
						b.Fatal(err)
					}
					if err := n.Start(bg); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if err := n.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		}
	}
}

// fillSingleRecordPartitions makes topic "wide" of the given partitions
// under cfg, one record produced to each, and stops the node cleanly.
func fillSingleRecordPartitions(b *testing.B, cfg Config, partitions int) {
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
	var g errgroup.Group
	g.SetLimit(32)
	for p := range partitions {
		g.Go(func() error {
			return retryBusy(func() error {
				_, err := n.Produce(bg, "wide", p, recs("wide", p, 0, 1))
				return err
			})
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	if err := n.Close(); err != nil {
		b.Fatal(err)
	}
}

// emptyHWMFiles empties every partition's hwm file, as the first commit
// after an open does and a crash leaves it.
func emptyHWMFiles(b *testing.B, dataDir string, partitions int) {
	b.Helper()
	for p := range partitions {
		name, _ := wire.PartitionDirName(p)
		if err := os.Truncate(filepath.Join(dataDir, wire.TopicsDirName, "wide", name, wire.HWMFileName), 0); err != nil {
			b.Fatal(err)
		}
	}
}
