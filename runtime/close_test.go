package runtime

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
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
				b.StartTimer()
				if err := n.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
