package clustertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// participantNode is one node of a cluster in this process: a
// runtime.Node on a cluster.Participant, its pulls through a
// DirectTransfer, in the order package server runs them.
type participantNode struct {
	id   string
	p    *cluster.Participant
	node *runtime.Node
	logs *logWatch
}

func startParticipant(t *testing.T, te *testEtcd, id string, transfer *cluster.DirectTransfer) *participantNode {
	t.Helper()
	dir := t.TempDir()
	logs, logger := newLogWatch()
	p, err := cluster.OpenParticipant(bg, cluster.ParticipantConfig{
		Endpoints: []string{"unix://" + te.socket}, DataDir: dir, NodeID: id, Transfer: transfer, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	node, err := runtime.New(runtime.Config{DataDir: dir, Metastore: p.Metastore(), Logger: logger, SegmentMaxBytes: 4 << 10})
	if err != nil {
		p.Close(bg)
		t.Fatal(err)
	}
	p.Attach(node)
	n := &participantNode{id: id, p: p, node: node, logs: logs}
	t.Cleanup(func() {
		p.StopMover()
		if err := node.Close(); err != nil {
			t.Errorf("node %s: close: %v", id, err)
		}
		if err := p.Close(bg); err != nil {
			t.Errorf("node %s: leave: %v", id, err)
		}
	})
	transfer.Add(p)
	if err := node.Start(bg); err != nil {
		t.Fatal(err)
	}
	if err := p.Join(bg, id+".test:7480"); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestParticipant_AMoveBetweenTwoInProcessNodes: two nodes in one
// process, each a Participant over its runtime.Node, move a partition of
// several segments while a producer writes to its old owner: every
// record the old owner acked (before the move, and during it until the
// freeze refused the next) is on the new owner at its offset, nothing
// more, and the old owner drops its copy once the move completed.
func TestParticipant_AMoveBetweenTwoInProcessNodes(t *testing.T) {
	te := startEtcd(t)
	var transfer cluster.DirectTransfer
	a, b := startParticipant(t, te, "a", &transfer), startParticipant(t, te, "b", &transfer)
	if _, _, err := a.node.CreateTopic(bg, "orders", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	src, dst := a, b
	if owner := owners(t, a.p.Metastore(), subscribe(a.p.Metastore()), "orders", 1)[0]; owner == "b" {
		src, dst = b, a
	}
	srcHeard := subscribe(src.p.Metastore())
	srcHeard.waitFor(t, "the old owner to own the partition", func() bool {
		mine, _ := src.p.Metastore().Assigned(bg, "orders", 0)
		return mine
	})

	var acked []string // by offset
	produce := func(values ...string) error {
		records := make([]partition.Record, len(values))
		for i, v := range values {
			records[i] = partition.Record{Value: []byte(v)}
		}
		base, err := src.node.Produce(bg, "orders", 0, records)
		if err != nil {
			return err
		}
		if base != int64(len(acked)) {
			return fmt.Errorf("acked at %d, after %d records", base, len(acked))
		}
		acked = append(acked, values...)
		return nil
	}
	for batch := range 30 { // several 4 KiB segments: some copied before the freeze
		values := make([]string, 10)
		for i := range values {
			values[i] = fmt.Sprintf("before-%03d-%03d-%080d", batch, i, 0)
		}
		if err := produce(values...); err != nil {
			t.Fatal(err)
		}
	}
	before := len(acked)

	stop, produced := make(chan struct{}), make(chan error, 1)
	go func() { // until the freeze refuses a produce
		for i := 0; ; i++ {
			select {
			case <-stop:
				produced <- nil
				return
			default:
			}
			if err := produce(fmt.Sprintf("during-%06d", i)); err != nil {
				produced <- err
				return
			}
		}
	}()
	if _, err := src.p.Metastore().RequestMove(bg, "orders", 0, dst.id); err != nil {
		close(stop)
		<-produced
		t.Fatal(err)
	}
	dstHeard := subscribe(dst.p.Metastore())
	dstHeard.waitFor(t, "the move to complete", func() bool {
		mine, _ := dst.p.Metastore().Assigned(bg, "orders", 0)
		return mine && len(dst.p.Metastore().Moves()) == 0
	})
	var err error
	select {
	case err = <-produced:
	case <-time.After(30 * time.Second):
		close(stop)
		err = <-produced
		t.Fatalf("the old owner still took produces once the move completed (%d acked)", len(acked))
	}
	if !errors.Is(err, runtime.ErrNotAssigned) {
		t.Fatalf("the produce the move ended: %v, want ErrNotAssigned", err)
	}
	t.Logf("%d records acked before the move was asked for, %d during it", before, len(acked)-before)

	src.logs.wait(t, "dropped this node's copy of a partition another node owns")
	if dirs, err := src.node.PartitionDirs("orders"); err != nil || slices.Contains(dirs, 0) {
		t.Fatalf("the old owner's partitions after the release: %v, %v; want its copy gone", dirs, err)
	}
	if dirs, err := dst.node.PartitionDirs("orders"); err != nil || !slices.Contains(dirs, 0) {
		t.Fatalf("the new owner's partitions: %v, %v; want the moved one", dirs, err)
	}
	var got []string
	for next := int64(0); ; {
		res, err := dst.node.Read(bg, "orders", 0, next, 1000, 1<<20)
		if err != nil {
			t.Fatalf("reading the new owner at %d: %v", next, err)
		}
		for _, r := range res.Records {
			if r.Offset != int64(len(got)) {
				t.Fatalf("the new owner read offset %d after %d records", r.Offset, len(got))
			}
			got = append(got, string(r.Value))
		}
		if next = res.Next; next >= res.HighWatermark {
			break
		}
	}
	if len(got) != len(acked) {
		t.Fatalf("the new owner holds %d records; the old owner acked %d", len(got), len(acked))
	}
	for i := range acked {
		if got[i] != acked[i] {
			t.Fatalf("offset %d on the new owner: %q, acked %q", i, got[i], acked[i])
		}
	}
}
