package datadir

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// TestIdentity_RecordedOnceAndCheckedAfter: a data directory's node and
// cluster ids are recorded durably once, kept, and another is refused.
func TestIdentity_RecordedOnceAndCheckedAfter(t *testing.T) {
	d := newTestDisk(t, 1)
	if _, ok, err := StoredNodeID(d, dataDir); ok || err != nil {
		t.Fatalf("a fresh directory has a node id: %v, %v", ok, err)
	}
	id := NewNodeID()
	if err := ValidateNodeID(id); err != nil || !strings.HasPrefix(id, "node-") {
		t.Fatalf("a new id %q: %v", id, err)
	}
	if err := RecordNodeID(d, dataDir, id); err != nil {
		t.Fatal(err)
	}
	if err := RecordClusterID(d, dataDir, "0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	crashed := d.Crash(sim.CrashPlan{}) // durable before they returned
	if got, ok, err := StoredNodeID(crashed, dataDir); !ok || err != nil || got != id {
		t.Fatalf("node id after a crash: %q, %v, %v", got, ok, err)
	}
	if got, ok, err := StoredClusterID(crashed, dataDir); !ok || err != nil || got != "0123456789abcdef" {
		t.Fatalf("cluster id after a crash: %q, %v, %v", got, ok, err)
	}
	if err := RecordNodeID(crashed, dataDir, id); err != nil {
		t.Fatalf("the same id again: %v", err)
	}
	if err := RecordNodeID(crashed, dataDir, "node-b"); !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), id) {
		t.Fatalf("another node id: %v, want ErrIdentity naming %s", err, id)
	}
	if err := RecordClusterID(crashed, dataDir, "fedcba9876543210"); !errors.Is(err, ErrIdentity) {
		t.Fatalf("another cluster id: %v, want ErrIdentity", err)
	}
}

// TestIdentity_RefusesBadIDsDamageAndFailedWrites: an id that cannot be a
// key's last element, a damaged id file and a failed write are errors,
// and a failed write leaves no id behind.
func TestIdentity_RefusesBadIDsDamageAndFailedWrites(t *testing.T) {
	d := newTestDisk(t, 1)
	for _, bad := range []string{"", "a/b", strings.Repeat("x", 65), "naïve", "a b"} {
		if err := RecordNodeID(d, dataDir, bad); err == nil {
			t.Fatalf("node id %q taken", bad)
		}
	}
	d.Inject(sim.Fault{Op: sim.OpSync, Path: filepath.Join(dataDir, wire.NodeIDFileName+vfs.TempSuffix), Nth: 1, Err: syscall.EIO})
	if err := RecordNodeID(d, dataDir, "node-a"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a failed write of the id: %v, want EIO", err)
	}
	if _, ok, _ := StoredNodeID(d, dataDir); ok {
		t.Fatal("a failed write left an id")
	}
	if err := vfs.WriteFileAtomic(d, filepath.Join(dataDir, wire.NodeIDFileName), []byte("no/de\n")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := StoredNodeID(d, dataDir); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a damaged id file: %v", err)
	}
}
