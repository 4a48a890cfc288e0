package runtime

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestClose_ParallelLeavesEveryHWMFileExact: Close closes the open logs
// in parallel (bounded), each between two commits; afterwards every hwm
// file holds its partition's exact high watermark and every consumer's
// progress is written out, with the lock order kept.
func TestClose_ParallelLeavesEveryHWMFileExact(t *testing.T) {
	d := newTestDisk(t, 1)
	ms, err := OpenLocalMetastore(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{DataDir: dataDir, FS: d, Metastore: ms, Testing: checkLockOrder})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		t.Fatal(err)
	}
	const topics, partitions = 2, 150
	for tp := range topics {
		name := fmt.Sprintf("t%d", tp)
		n.CreateTopic(bg, name, partitions, Retention{})
		for p := range partitions {
			if _, err := n.Produce(bg, name, p, recs(name, p, 0, 1+p%4)); err != nil {
				t.Fatal(err)
			}
			if p%3 == 0 {
				if _, err := n.Ack(bg, name, p, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if v := n.LockOrderViolations(); len(v) > 0 {
		t.Fatalf("lock-order violations: %v", v)
	}
	img := d.Crash(sim.CrashPlan{Data: sim.DropUnsynced}) // only what was synced
	for tp := range topics {
		for p := range partitions {
			dir := filepath.Join(dataDir, "topics", fmt.Sprintf("t%d", tp), fmt.Sprintf("p%05d", p))
			b, err := vfs.ReadFile(img, filepath.Join(dir, "hwm"), 8)
			if err != nil || len(b) != 8 || binary.BigEndian.Uint64(b) != uint64(1+p%4) {
				t.Fatalf("t%d/%d: hwm file %v %v, want %d, synced", tp, p, b, err, 1+p%4)
			}
			if p%3 == 0 {
				b, err := vfs.ReadFile(img, filepath.Join(dir, "consumer.offset"), 8)
				if err != nil || len(b) != 8 || binary.BigEndian.Uint64(b) != 1 {
					t.Fatalf("t%d/%d: consumer.offset %v %v, want 1, synced", tp, p, b, err)
				}
			}
		}
	}
}

// BenchmarkNodeClose measures Close of a node with many open partitions
// on the real disk (docs: shutdown at scale): go test -run '^$'
// -bench NodeClose ./runtime.
func BenchmarkNodeClose(b *testing.B) {
	for _, partitions := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				n, err := New(Config{DataDir: dir, MaxOpenLogs: -1}) // every log open at Close
				if err != nil {
					b.Fatal(err)
				}
				if err := n.Start(bg); err != nil {
					b.Fatal(err)
				}
				n.CreateTopic(bg, "wide", partitions, Retention{})
				for p := range partitions {
					if _, err := n.Produce(bg, "wide", p, recs("wide", p, 0, 1)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := n.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNodeStart measures Start of a node whose partitions were all
// closed cleanly, on the real disk, within the default open-log budget:
// go test -run '^$' -bench NodeStart ./runtime.
func BenchmarkNodeStart(b *testing.B) {
	for _, partitions := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			dir := b.TempDir()
			n, err := New(Config{DataDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			if err := n.Start(bg); err != nil {
				b.Fatal(err)
			}
			n.CreateTopic(bg, "wide", partitions, Retention{})
			for p := range partitions {
				if _, err := n.Produce(bg, "wide", p, recs("wide", p, 0, 1)); err != nil {
					b.Fatal(err)
				}
			}
			if err := n.Close(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				n, err := New(Config{DataDir: dir})
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

// TestStartup_ProgressPastTheBudgetIsHonest: a node whose partitions
// outnumber its open-log budget logs startup progress that ends with every
// partition opened (recovered), none skipped, and no more open than the
// budget, which it says.
func TestStartup_ProgressPastTheBudgetIsHonest(t *testing.T) {
	const partitions, budget = 120, 10
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{MaxOpenLogs: budget})
	if _, _, err := n.CreateTopic(bg, "wide", partitions, Retention{}); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	n = startNode(t, d, Config{MaxOpenLogs: budget, Logger: zap.New(core)})
	lines := logs.FilterMessage("startup: opening partitions").All()
	if len(lines) == 0 {
		t.Fatal("no startup progress logged")
	}
	last := lines[len(lines)-1].ContextMap()
	if last["opened"] != int64(partitions) || last["skipped"] != int64(0) || last["total"] != int64(partitions) ||
		last["open_limit"] != int64(budget) || last["open_now"].(int64) > budget || last["open_now"].(int64) == 0 {
		t.Fatalf("last progress line %v: want %d opened of %d, none skipped, 1 to %d open", last, partitions, partitions, budget)
	}
	if open := n.reg.Len(); open > budget {
		t.Fatalf("%d logs open after startup, budget %d", open, budget)
	}
}
