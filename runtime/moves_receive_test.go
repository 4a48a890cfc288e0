package runtime

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// TestReceive_StreamsFilesAndInstallsAtCommit: a moved partition's files
// arrive a byte at a time; until the Commit the partition serves what it
// held (nothing of the receive is served), and after it exactly the
// received records.
func TestReceive_StreamsFilesAndInstallsAtCommit(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	files, rec := installFixture(t, n)
	old := readValues(t, n, "orders", 0)
	r, err := n.ReceivePartition(bg, "orders", 0, rec.Incarnation)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := r.WriteFile(f.Name, int64(len(f.Data)), iotest.OneByteReader(bytes.NewReader(f.Data))); err != nil {
			t.Fatal(err)
		}
		if got := readValues(t, n, "orders", 0); !slices.Equal(got, old) {
			t.Fatalf("mid-receive the partition serves %d records, want its own %d", len(got), len(old))
		}
	}
	if err := r.WriteFile(files[0].Name, int64(len(files[0].Data)), bytes.NewReader(files[0].Data)); err == nil {
		t.Fatal("a file received twice was taken")
	}
	if err := r.Commit(bg); err != nil {
		t.Fatal(err)
	}
	if got := readValues(t, n, "orders", 0); len(got) != 10 || !slices.Equal(got, old[:10]) {
		t.Fatalf("after the commit: %d records, want the 10 received", len(got))
	}
	if err := r.WriteFile(files[0].Name, 1, bytes.NewReader(files[0].Data)); !errors.Is(err, ErrReceiveEnded) {
		t.Fatalf("a write after the commit: %v, want ErrReceiveEnded", err)
	}
}

// TestReceive_ACutShortFileFailsAndAbortKeepsThePartition: a file whose
// source ends before its size is an error (never a short segment
// installed), and Abort removes the staging directory and leaves the
// partition as it was.
func TestReceive_ACutShortFileFailsAndAbortKeepsThePartition(t *testing.T) {
	n := startNode(t, nil, Config{SegmentMaxBytes: 1 << 10})
	files, rec := installFixture(t, n)
	old := readValues(t, n, "orders", 0)
	r, err := n.ReceivePartition(bg, "orders", 0, rec.Incarnation)
	if err != nil {
		t.Fatal(err)
	}
	f := files[0]
	if err := r.WriteFile(f.Name, int64(len(f.Data)), bytes.NewReader(f.Data[:len(f.Data)/2])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a file cut short: %v, want io.ErrUnexpectedEOF", err)
	}
	if err := r.WriteFile("incarnation", 17, bytes.NewReader(make([]byte, 17))); err == nil {
		t.Fatal("a file a partition does not move (the topic's marker) was taken")
	}
	if err := r.Abort(); err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(partitionPath("orders", 0) + wire.InstallingDirSuffix)
	if ok, _ := vfs.Exists(n.disk, staging); ok {
		t.Fatal("Abort left the staging directory")
	}
	if got := readValues(t, n, "orders", 0); !slices.Equal(got, old) {
		t.Fatalf("after the abort the partition serves %d records, want its %d", len(got), len(old))
	}
	if err := r.Commit(bg); !errors.Is(err, ErrReceiveEnded) {
		t.Fatalf("a commit after the abort: %v, want ErrReceiveEnded", err)
	}
}

// TestReceive_OneAtATimeAndTakingASegmentBack: a second receive of a
// partition is refused while one is under way (they would share the
// staging directory: found by review), and so is a drop of it; a segment
// taken back (the sender's retention deleted it) is not installed.
func TestReceive_OneAtATimeAndTakingASegmentBack(t *testing.T) {
	var ms *testMetastore
	n := startNodeWith(t, nil, Config{SegmentMaxBytes: 1 << 10}, func(local *LocalMetastore) Metastore {
		ms = foreignOwner(nil)(local).(*testMetastore)
		return ms
	})
	files, rec := installFixture(t, n)
	r, err := n.ReceivePartition(bg, "orders", 0, rec.Incarnation)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.ReceivePartition(bg, "orders", 0, rec.Incarnation); !errors.Is(err, ErrReceiveInProgress) {
		t.Fatalf("a second receive: %v, want ErrReceiveInProgress", err)
	}
	for _, f := range files {
		if err := r.WriteFile(f.Name, int64(len(f.Data)), bytes.NewReader(f.Data)); err != nil {
			t.Fatal(err)
		}
	}
	deleted, _ := wire.SegmentFileName(1 << 20) // a later segment the sender's retention deleted before its final listing
	if err := r.WriteFile(deleted, 5, bytes.NewReader([]byte("stale"))); err != nil {
		t.Fatal(err)
	}
	if err := r.Remove(wire.HWMFileName); err == nil {
		t.Fatal("the hwm file was taken back")
	}
	if err := r.Remove(deleted); err != nil {
		t.Fatal(err)
	}
	ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true }) // another node's, as before a move completes
	if err := n.DropPartition(bg, "orders", 0); !errors.Is(err, ErrReceiveInProgress) {
		t.Fatalf("dropping a partition being received: %v, want ErrReceiveInProgress", err)
	}
	ms.set(func(m *testMetastore) { delete(m.foreign, key("orders", 0)) })
	if err := r.Commit(bg); err != nil {
		t.Fatal(err)
	}
	if ok, _ := vfs.Exists(n.disk, filepath.Join(partitionPath("orders", 0), deleted)); ok {
		t.Fatal("a segment taken back was installed")
	}
	if got := readValues(t, n, "orders", 0); len(got) != 10 {
		t.Fatalf("after the commit: %d records, want the 10 received", len(got))
	}
	again, err := n.ReceivePartition(bg, "orders", 0, rec.Incarnation) // the first one ended
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Abort(); err != nil {
		t.Fatal(err)
	}
}

// TestReceive_NeverInstallsOverAPartitionAssignedHereSinceItBegan: a
// receive that began while another node owned the partition is refused
// at its commit once the metastore assigns the partition here: this node
// may be serving it, and what it acked stays (found by review: a lost
// node's partition given, empty, to the node still pulling it, whose
// install then replaced the records it had acked since).
func TestReceive_NeverInstallsOverAPartitionAssignedHereSinceItBegan(t *testing.T) {
	var ms *testMetastore
	n := startNodeWith(t, nil, Config{SegmentMaxBytes: 1 << 10}, func(local *LocalMetastore) Metastore {
		ms = foreignOwner(nil)(local).(*testMetastore)
		return ms
	})
	files, rec := installFixture(t, n)
	ms.set(func(m *testMetastore) { m.foreign[key("orders", 0)] = true }) // another node's while this one pulls it
	r, err := n.ReceivePartition(bg, "orders", 0, rec.Incarnation)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := r.WriteFile(f.Name, int64(len(f.Data)), bytes.NewReader(f.Data)); err != nil {
			t.Fatal(err)
		}
	}
	ms.set(func(m *testMetastore) { delete(m.foreign, key("orders", 0)) }) // given to this node meanwhile
	if _, err := n.Produce(bg, "orders", 0, recs("orders", 0, 20, 1)); err != nil {
		t.Fatal(err)
	}
	want := readValues(t, n, "orders", 0)
	if err := r.Commit(bg); !errors.Is(err, ErrAssigned) {
		t.Fatalf("a commit over a partition assigned here since the receive began: %v, want ErrAssigned", err)
	}
	if got := readValues(t, n, "orders", 0); !slices.Equal(got, want) {
		t.Fatalf("after the refused commit the partition serves %d records, want its %d", len(got), len(want))
	}
	staging := filepath.Join(partitionPath("orders", 0) + wire.InstallingDirSuffix)
	if ok, _ := vfs.Exists(n.disk, staging); ok {
		t.Fatal("the refused commit left the staging directory")
	}
}
