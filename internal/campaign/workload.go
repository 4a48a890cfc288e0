package campaign

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/internal/fsys"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// The reference workload (fault model, "The matrix"): one partition, 100
// commits of 1 to 4 KiB, 64 KiB segments (about four rolls), retention
// keeping the last few segments (one second of fake time per commit, a
// 40 s bound, the reaper every 10 s), a consumer acking two commits
// behind (written out every second), a clean close and reopen at commit
// 50 and a final close. Every record's bytes are a pure function of
// (seed, offset), so any served byte can be checked.
const (
	Topic           = "ref"
	commits         = 100
	reopenAt        = 50
	segmentMaxBytes = 64 << 10
	retention       = 40 * time.Second
	commitEvery     = time.Second
	reaperEvery     = 10 * time.Second
)

// DataDir is where the workload's node keeps its data on the simulated disk.
const DataDir = "/data"

// Value is the record at offset of a seeded run: 256 B to 1 KiB derived
// from (seed, offset).
func Value(seed uint64, offset int64) []byte {
	h := fnv.New64a()
	binary.Write(h, binary.BigEndian, seed)
	binary.Write(h, binary.BigEndian, offset)
	sum := h.Sum64()
	out := make([]byte, 256+int(sum%769))
	for i := range out {
		out[i] = byte(sum >> (8 * (i % 8)))
	}
	copy(out, fmt.Sprintf("seed=%d offset=%d ", seed, offset))
	return out
}

// Model is what the workload has promised at one point (the fault model's
// three-valued oracle): offsets below Committed are set (an honest commit
// returned), [Committed, Written) are maybe (a commit in flight), the rest
// unset; Consumed are the offsets whose ack returned.
type Model struct {
	Committed int64
	Written   int64
	Consumed  map[int64]bool
}

func (m Model) clone() Model {
	m.Consumed = maps.Clone(m.Consumed)
	return m
}

// Config makes the workload's node config over d.
func Config(d *fsys.Disk, c codec.ID) runtime.Config {
	cd, _ := codec.ByID(c)
	return runtime.Config{
		DataDir: DataDir, FS: d, Codec: cd, SegmentMaxBytes: segmentMaxBytes,
		ReaperInterval: reaperEvery, IdleEvictAfter: 1000 * time.Hour,
		QuarantineSweepInterval: 1000 * time.Hour, CheckLockOrder: true,
	}
}

// StartNode starts a node on d with the workload's config.
func StartNode(ctx context.Context, d *fsys.Disk, c codec.ID) (*runtime.Node, error) {
	ms, err := runtime.OpenLocalMetastore(d, DataDir)
	if err != nil {
		return nil, err
	}
	n, err := runtime.New(Config(d, c), ms, nil, nil)
	if err != nil {
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Run runs the reference workload on d, keeping m current; sleep advances
// the fake clock (a synctest bubble's time.Sleep). It returns at the first
// error, which is a bug of the engine: the workload injects nothing.
func Run(ctx context.Context, d *fsys.Disk, c codec.ID, seed uint64, m *Model, lock func(func())) error {
	n, err := StartNode(ctx, d, c)
	if err != nil {
		return err
	}
	defer func() {
		if n != nil {
			n.Close()
		}
	}()
	if _, _, err := n.CreateTopic(ctx, Topic, 1, retention.Milliseconds()); err != nil {
		return err
	}
	rng := fnv.New64a()
	binary.Write(rng, binary.BigEndian, seed)
	var boundaries []int64 // the end offset of every commit
	for i := range commits {
		if i == reopenAt {
			if err := n.Close(); err != nil {
				return fmt.Errorf("close at commit %d: %w", i, err)
			}
			n = nil
			if n, err = StartNode(ctx, d, c); err != nil {
				return fmt.Errorf("reopen at commit %d: %w", i, err)
			}
		}
		rng.Write([]byte{byte(i)})
		count := 2 + int(rng.Sum64()%5) // 2 to 6 records of 256 B to 1 KiB: 1 to 4 KiB a frame
		base := m.Written
		records := make([]partition.Record, count)
		for j := range records {
			records[j] = partition.Record{Value: Value(seed, base+int64(j))}
		}
		lock(func() { m.Written = base + int64(count) })
		got, err := n.Produce(ctx, Topic, 0, records)
		if err != nil || got != base {
			return fmt.Errorf("commit %d: base %d, want %d: %v", i, got, base, err)
		}
		lock(func() { m.Committed = m.Written })
		boundaries = append(boundaries, m.Written)
		if len(boundaries) > 2 {
			var acks []int64
			from := int64(0)
			if len(boundaries) > 3 {
				from = boundaries[len(boundaries)-4]
			}
			for o := from; o < boundaries[len(boundaries)-3]; o++ {
				acks = append(acks, o)
			}
			if _, err := n.Ack(ctx, Topic, 0, acks...); err != nil {
				return fmt.Errorf("ack after commit %d: %w", i, err)
			}
			lock(func() {
				for _, o := range acks {
					m.Consumed[o] = true
				}
			})
		}
		time.Sleep(commitEvery) // fake time: consumer write-outs, the reaper, segment ages
	}
	err = n.Close()
	n = nil
	return err
}
