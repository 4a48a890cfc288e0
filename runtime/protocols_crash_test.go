package runtime

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/wire"
)

// protoModel is what the workload of TestProtocols_CrashAtEveryCall has
// promised at one point: per partition, how many records were acked (the
// record at offset o of incarnation epoch e has the bytes protoValue(e, o),
// so any served byte can be checked), and what may legitimately be gone.
type protoModel struct {
	epochs    map[wire.IncarnationID]int // every incarnation the workload made
	acked     map[string]int             // "topic/p" of the newest epoch -> records acked
	epochOf   map[string]int             // topic -> its newest epoch
	swept     map[string]bool            // "topic/p": a sweep began; a prefix may be gone
	installed map[string]int             // "topic/p": an install began; it may hold this many instead
	consumed  map[int64]bool             // offsets of orders/0 the consumer acked (first epoch)
}

func (m protoModel) clone() protoModel {
	return protoModel{epochs: maps.Clone(m.epochs), acked: maps.Clone(m.acked), epochOf: maps.Clone(m.epochOf),
		swept: maps.Clone(m.swept), installed: maps.Clone(m.installed), consumed: maps.Clone(m.consumed)}
}

func protoValue(topic string, epoch, p int, offset int64) string {
	return fmt.Sprintf("%s/e%d/p%d/%d/%s", topic, epoch, p, offset, strings.Repeat("x", 100))
}

// TestProtocols_CrashAtEveryCall is the crash sweep of the runtime's
// multi-step protocols (doc.go, "Protocols"): a workload through a node
// creates topics, produces with rolls, acks and writes consumer progress
// out, evicts and reopens, sweeps retention, installs a partition,
// quarantines a stale incarnation, deletes and recreates a topic. Before
// every mutating call, in every crash mode, a crash image is taken; a fresh
// node starts on each and the invariants of the fault model are checked:
// no record served that was not produced at that offset of that
// incarnation (I1), every acked record served unless retention or an
// install may have removed it (I4), the consumer frontier never past an
// unacked offset (I9), no install leftover after startup, no partition
// without its directory (a partition with acked records that serves none).
func TestProtocols_CrashAtEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The workload sweeps and evicts itself: the node's own loops
		// would race it as the two hours of fake time pass.
		n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10, ReaperInterval: 1000 * time.Hour, IdleEvictAfter: 1000 * time.Hour})
		m := protoModel{epochs: map[wire.IncarnationID]int{}, acked: map[string]int{}, epochOf: map[string]int{},
			swept: map[string]bool{}, installed: map[string]int{}, consumed: map[int64]bool{}}
		epoch := 0
		create := func(topic string, partitions int, retention time.Duration) {
			rec, _, err := n.CreateTopic(bg, topic, partitions, Retention{Ms: retention.Milliseconds()})
			if err != nil {
				t.Fatal(err)
			}
			epoch++
			m.epochs[rec.Incarnation], m.epochOf[topic] = epoch, epoch
			for p := range partitions {
				m.acked[fmt.Sprintf("%s/%d", topic, p)] = 0
			}
		}
		produce := func(topic string, p, count int) {
			k := fmt.Sprintf("%s/%d", topic, p)
			from := int64(m.acked[k])
			batch := make([]partition.Record, count)
			for i := range batch {
				batch[i] = partition.Record{Value: []byte(protoValue(topic, m.epochOf[topic], p, from+int64(i)))}
			}
			base, err := n.Produce(bg, topic, p, batch)
			if err != nil || base != from {
				t.Fatalf("produce %s at %d: base %d, %v", k, from, base, err)
			}
			m.acked[k] += count
		}
		explore := crashtest.NewExplorer(n.disk, m.clone)
		explore.Run(func() {
			create("orders", 2, time.Hour)
			create("q", 1, 0)
			for i := range 12 {
				produce("orders", i%2, 3)
			}
			produce("q", 0, 3)
			for round, acks := range [][]int64{{0, 1, 2, 5}, {3, 4, 9}} {
				if _, err := n.Ack(bg, "orders", 0, acks...); err != nil {
					t.Fatal(err)
				}
				for _, o := range acks {
					m.consumed[o] = true
				}
				n.committer.tickAll(runItem)
				if round == 1 {
					n.committer.writeOutAll(runItem)
				}
			}
			// Eviction closes every log (hwm files, consumer write-out).
			if closed := n.EvictIdle(time.Now().Add(2000 * time.Hour)); closed != 3 {
				t.Fatalf("evicted %d logs, want 3", closed)
			}
			files, installedCount := n.partitionFiles(t, "orders", 1), m.acked["orders/1"]
			// Reopens.
			produce("orders", 0, 3)
			produce("orders", 1, 3)
			// Retention: everything sealed so far expires.
			<-time.After(2 * time.Hour)
			produce("orders", 0, 3)
			m.swept["orders/0"] = true
			l, err := n.Log(bg, "orders", 0)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := l.Sweep(bg); err != nil || res.DeletedSegments == 0 {
				t.Fatalf("sweep: %+v, %v", res, err)
			}
			// An install brings orders/1 back to what it was at the eviction.
			m.installed["orders/1"] = installedCount
			rec, _, _ := n.ms.Topic(bg, "orders")
			if err := n.InstallPartition(bg, "orders", 1, rec.Incarnation, files); err != nil {
				t.Fatal(err)
			}
			m.acked["orders/1"], m.installed["orders/1"] = installedCount, 0
			delete(m.installed, "orders/1")
			// q is deleted and recreated behind this node's back: its
			// directory is quarantined by the next open.
			if err := n.reg.CloseLive(key("q", 0)); err != nil {
				t.Fatal(err)
			}
			epoch++
			fresh := wire.IncarnationID(fmt.Sprintf("%016x", epoch))
			m.epochs[fresh] = epoch
			n.ms.mu.Lock()
			qrec := n.ms.topics["q"]
			qrec.Incarnation = fresh
			n.ms.topics["q"] = qrec
			if err := n.ms.saveLocked(); err != nil {
				t.Fatal(err)
			}
			n.ms.mu.Unlock()
			m.epochOf["q"], m.acked["q/0"] = epoch, 0
			produce("q", 0, 2)
			// orders is deleted (purged) and recreated.
			if err := n.DeleteTopic(bg, "orders"); err != nil {
				t.Fatal(err)
			}
			delete(m.acked, "orders/0")
			delete(m.acked, "orders/1")
			delete(m.epochOf, "orders")
			create("orders", 1, 0)
			produce("orders", 0, 4)
		})
		for _, img := range explore.Images() {
			checkProtocolImage(t, img)
		}
		t.Logf("runtime protocol crash states: %d distinct, from %d mutating calls; violations: 0", len(explore.Images()), explore.Calls())
	})
}

// partitionFiles reads a closed partition's files, as a move's source
// would send them.
func (n *testNode) partitionFiles(t *testing.T, topic string, p int) []InstallFile {
	t.Helper()
	listing, err := n.TransferListing(bg, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	var files []InstallFile
	for _, s := range listing.Segments {
		b, err := n.disk.Contents(filepath.Join(partitionPath(topic, p), s.Name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, InstallFile{Name: s.Name, Data: b})
	}
	hwm, _ := wire.EncodeOffsetFile(listing.HighWatermark)
	return append(files, InstallFile{Name: wire.HWMFileName, Data: hwm[:]})
}

func checkProtocolImage(t *testing.T, img crashtest.Image[protoModel]) {
	t.Helper()
	m := img.Model
	r := startImage(t, img.Disk)
	defer r.Close()
	assertNoInstallLeftovers(t, r.disk, img.Label)
	topics, err := r.ms.Topics(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range topics {
		epoch, ok := m.epochs[rec.Incarnation]
		if !ok {
			// Made durable by a create that had not returned its id yet:
			// nothing was produced to it, so nothing may be served.
			epoch = -1
		}
		for p := range rec.Partitions {
			k := fmt.Sprintf("%s/%d", rec.Name, p)
			start, served := int64(-1), int64(0)
			for offset := int64(0); ; {
				res, err := r.Read(bg, rec.Name, p, offset, 1000, 1<<20)
				if errors.Is(err, partition.ErrOffsetDeleted) && m.swept[k] && offset == 0 {
					l, _ := r.Log(bg, rec.Name, p)
					offset = l.StartOffset()
					continue
				}
				if err != nil {
					t.Fatalf("%s: read %s at %d: %v", img.Label, k, offset, err)
				}
				for _, got := range res.Records {
					if start < 0 {
						start = got.Offset
					}
					if want := protoValue(rec.Name, epoch, p, got.Offset); string(got.Value) != want {
						t.Fatalf("%s: %s offset %d holds %q, want %q (I1)", img.Label, k, got.Offset, got.Value, want)
					}
					served = got.Offset + 1
				}
				if res.Next >= res.HighWatermark {
					break
				}
				offset = res.Next
			}
			if m.epochOf[rec.Name] != epoch {
				continue // an incarnation the workload has moved past: nothing promised
			}
			acked := int64(m.acked[k])
			if inst, ok := m.installed[k]; ok && served == int64(inst) {
				continue // the install went through: its records, checked above
			}
			if served < acked && !img.Garbage {
				t.Fatalf("%s: %s serves up to %d, %d were acked (I4)", img.Label, k, served, acked)
			}
			if start > 0 && !m.swept[k] {
				t.Fatalf("%s: %s starts at %d with no sweep begun", img.Label, k, start)
			}
		}
	}
	if m.epochOf["orders"] == 1 {
		if rec, ok, _ := r.ms.Topic(bg, "orders"); ok && m.epochs[rec.Incarnation] == 1 {
			st, err := r.ConsumerState(bg, "orders", 0)
			if err != nil {
				t.Fatalf("%s: consumer state: %v", img.Label, err)
			}
			for o := int64(0); o < st.Frontier; o++ {
				if !m.consumed[o] {
					t.Fatalf("%s: consumer frontier %d passes unacked offset %d (I9)", img.Label, st.Frontier, o)
				}
			}
		}
	}
}
