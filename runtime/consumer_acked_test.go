package runtime

import (
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// keptModel is what the workload of TestConsumer_CleanClosesKeepEveryAck
// has promised at one point: the offsets acked (durable or not), the
// offsets a clean close has returned on since they were acked (kept
// across any crash from then on), and the highest lease id given.
type keptModel struct {
	acked, kept map[int64]bool
	leaseID     uint64
}

func (m keptModel) clone() keptModel {
	return keptModel{acked: maps.Clone(m.acked), kept: maps.Clone(m.kept), leaseID: m.leaseID}
}

// TestConsumer_CleanClosesKeepEveryAck_CrashAtEveryCall: the crash sweep
// of consumer.acked and consumer.lease (docs/design.md, "Consumer
// progress" and "Queue consume"). A queue leases 6,000 records, every
// offset but the first is acked (a set over a slot), the log closes
// cleanly (consumer.acked written), reopens, the first offset is acked
// and the log closes again (the set fits: consumer.acked removed), and a
// consume leases again. Before every mutating call, in every crash mode,
// a node starts on the image: its frontier never passes an unacked offset
// and its set holds only acked ones (I9); every ack a clean close
// returned on is kept; the lease floor on disk is at least every lease id
// given.
func TestConsumer_CleanClosesKeepEveryAck_CrashAtEveryCall(t *testing.T) {
	const count = 6000
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
		makeTopic(t, n, "jobs", 1, 0)
		if _, err := n.Produce(bg, "jobs", 0, recs("jobs", 0, 0, count)); err != nil {
			t.Fatal(err)
		}
		m := keptModel{acked: map[int64]bool{}, kept: map[int64]bool{}}
		consume := func() {
			got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: count, MaxBytes: 1 << 30, Lease: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range got {
				m.leaseID = max(m.leaseID, r.LeaseID)
			}
		}
		ack := func(offsets ...int64) {
			if _, err := n.Ack(bg, "jobs", 0, offsets...); err != nil {
				t.Fatal(err)
			}
			for _, o := range offsets {
				m.acked[o] = true
			}
		}
		closeLog := func() {
			if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
				t.Fatal(err)
			}
			maps.Copy(m.kept, m.acked)
		}
		explore := crashtest.NewExplorer(n.disk, m.clone)
		explore.Run(func() {
			consume()
			var offsets []int64
			for o := int64(1); o < count; o++ {
				offsets = append(offsets, o)
			}
			ack(offsets...)
			closeLog()
			ack(0)
			closeLog()
			consume()
		})
		for _, img := range explore.Images() {
			checkKeptImage(t, img, count)
		}
		t.Logf("consumer.acked and consumer.lease crash states: %d distinct, from %d mutating calls; violations: 0", len(explore.Images()), explore.Calls())
	})
}

func checkKeptImage(t *testing.T, img crashtest.Image[keptModel], count int64) {
	t.Helper()
	m := img.Model
	r := startImage(t, img.Disk)
	defer r.Close()
	if b, err := r.disk.Contents(filepath.Join(partitionPath("jobs", 0), wire.ConsumerLeaseFileName)); err == nil || m.leaseID > 0 {
		floor, _, derr := wire.DecodeLeaseFloor(b)
		if (derr != nil || floor < m.leaseID) && !img.Garbage {
			t.Fatalf("%s: lease floor %d (%v, %v), lease id %d was given", img.Label, floor, err, derr, m.leaseID)
		}
	}
	if _, ok, _ := r.ms.Topic(bg, "jobs"); !ok {
		return // the image is from before the topic was durable
	}
	st, err := r.ConsumerState(bg, "jobs", 0)
	if err != nil {
		t.Fatalf("%s: consumer state: %v", img.Label, err)
	}
	acked := map[int64]bool{}
	for o := range st.Frontier {
		acked[o] = true
	}
	for _, o := range st.AckedAhead {
		acked[o] = true
	}
	for o := range acked {
		if !m.acked[o] {
			t.Fatalf("%s: offset %d recovered as acked (frontier %d), never acked (I9)", img.Label, o, st.Frontier)
		}
	}
	for o := range m.kept {
		if !acked[o] && !img.Garbage {
			t.Fatalf("%s: offset %d, acked before a clean close returned, recovered unacked (frontier %d, %d ahead)", img.Label, o, st.Frontier, len(st.AckedAhead))
		}
	}
}

// TestConsumer_ADamagedOrForeignAckedFileIsRejected: a consumer.acked that
// fails its checks, or belongs to another incarnation, adds nothing: it
// is logged and counted, recovery keeps what the slots give, and the next
// clean close replaces it.
func TestConsumer_ADamagedOrForeignAckedFileIsRejected(t *testing.T) {
	for name, content := range map[string]func(t *testing.T) []byte{
		"damaged": func(*testing.T) []byte { return []byte("NRCK not a file") },
		"foreign": func(t *testing.T) []byte {
			b, err := wire.EncodeAckedFile(wire.AckedRecord{Sequence: 1, Incarnation: "00000000000000aa", Frontier: 0, Ahead: []int64{3, 4}})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := newTestDisk(t, 1)
			n := startNode(t, d, Config{})
			makeTopic(t, n, "jobs", 1, 10)
			if _, err := n.Ack(bg, "jobs", 0, 2); err != nil {
				t.Fatal(err)
			}
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(partitionPath("jobs", 0), wire.ConsumerAckedFileName)
			if err := vfs.WriteFileAtomic(d, path, content(t)); err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			core, logs := observer.New(zapcore.WarnLevel)
			n = startNode(t, d, Config{Registerer: reg, Logger: zap.New(core)})
			st, err := n.ConsumerState(bg, "jobs", 0)
			if err != nil || st.Frontier != 0 || fmt.Sprint(st.AckedAhead) != "[2]" {
				t.Fatalf("recovered %+v (%v), want frontier 0 with [2] ahead", st, err)
			}
			if got := series(t, reg, "narad_consumer_slot_decode_failures_total"); got != "1\n" {
				t.Errorf("narad_consumer_slot_decode_failures_total: %q, want 1", got)
			}
			if logs.FilterMessageSnippet("consumer.acked").Len() != 1 {
				t.Errorf("warnings: %v", logs.All())
			}
			if err := n.reg.CloseLive(key("jobs", 0)); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Contents(path); err == nil {
				t.Error("the close left the rejected consumer.acked in place (the set fits a slot)")
			}
		})
	}
}

// TestQueue_ADamagedLeaseFloorIsWrittenAgain: a consumer.lease that fails
// its checks is logged, the ids start from the clock, and the first lease
// writes a valid floor above its id.
func TestQueue_ADamagedLeaseFloorIsWrittenAgain(t *testing.T) {
	d := newTestDisk(t, 1)
	core, logs := observer.New(zapcore.WarnLevel)
	n := startNode(t, d, Config{Logger: zap.New(core)})
	makeTopic(t, n, "jobs", 1, 1)
	path := filepath.Join(partitionPath("jobs", 0), wire.ConsumerLeaseFileName)
	if err := vfs.WriteFileAtomic(d, path, []byte("NRLF damaged floor!!")); err != nil {
		t.Fatal(err)
	}
	got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0})
	if err != nil || len(got) != 1 {
		t.Fatalf("%v, %v", got, err)
	}
	if logs.FilterMessageSnippet("consumer.lease rejected").Len() != 1 {
		t.Errorf("warnings: %v", logs.All())
	}
	b, _ := d.Contents(path)
	if floor, _, err := wire.DecodeLeaseFloor(b); err != nil || floor < got[0].LeaseID || got[0].LeaseID < uint64(time.Now().Add(-time.Hour).UnixMicro()) {
		t.Fatalf("floor %d (%v) after lease id %d", floor, err, got[0].LeaseID)
	}
}
