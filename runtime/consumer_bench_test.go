package runtime

import (
	"fmt"
	"testing"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
)

// BenchmarkAck: acks per second on one partition, each ack one offset in
// order (the committer's ticks run as in production).
func BenchmarkAck(b *testing.B) {
	dir := b.TempDir()
	ms, _ := OpenLocalMetastore(vfs.OS{}, dir)
	n, err := New(Config{DataDir: dir, Metastore: ms})
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(bg); err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	n.CreateTopic(bg, "orders", 1, Retention{})
	batch := make([]partition.Record, 10000)
	for i := range batch {
		batch[i] = partition.Record{Value: []byte("v")}
	}
	for range 20 {
		n.Produce(bg, "orders", 0, batch)
	}
	b.ReportAllocs()
	next := int64(0)
	for b.Loop() {
		if _, err := n.Ack(bg, "orders", 0, next%200000); err != nil {
			b.Fatal(err)
		}
		next++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acks/s")
}

// BenchmarkCommitterTick: one committer tick and write-out with 10
// partitions acked among many with consumer state loaded: the cost is the
// acked partitions', whatever the total.
func BenchmarkCommitterTick(b *testing.B) {
	for _, total := range []int{10, 10000} {
		b.Run(fmt.Sprintf("partitions=%d/acked=10", total), func(b *testing.B) {
			d := sim.NewDisk(1)
			d.MkdirAll(dataDir)
			ms, _ := OpenLocalMetastore(d, dataDir)
			n, err := New(Config{DataDir: dataDir, FS: d, Metastore: ms})
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			n.CreateTopic(bg, "orders", total, Retention{})
			batch := make([]partition.Record, 4096)
			for i := range batch {
				batch[i] = partition.Record{Value: []byte("v")}
			}
			acked := func(p int) bool { return p%(total/10) == 0 }
			for p := range total {
				recs := batch[:1]
				if acked(p) {
					recs = batch
				}
				n.Produce(bg, "orders", p, recs)
				if _, err := n.ConsumerState(bg, "orders", p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := int64(0)
			for b.Loop() {
				for p := range total {
					if acked(p) {
						if _, err := n.Ack(bg, "orders", p, i%4096); err != nil {
							b.Fatal(err)
						}
					}
				}
				n.committer.tickAll(runItem)
				n.committer.writeOutAll(runItem)
				i++
			}
		})
	}
}
