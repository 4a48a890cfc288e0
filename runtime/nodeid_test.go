package runtime

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

// TestNodeIDOf_StoredAtFirstStartAndCheckedAfter: a data directory gets
// its node id at the first start (the one asked for, or a random one),
// keeps it, and refuses another.
func TestNodeIDOf_StoredAtFirstStartAndCheckedAfter(t *testing.T) {
	d := newTestDisk(t, 1)
	id, err := NodeIDOf(d, dataDir, "")
	if err != nil || !strings.HasPrefix(id, "node-") || ValidateNodeID(id) != nil {
		t.Fatalf("first start without an id: %q, %v", id, err)
	}
	for _, want := range []string{"", id} {
		if again, err := NodeIDOf(d, dataDir, want); err != nil || again != id {
			t.Fatalf("restart asking %q: %q, %v; want %q", want, again, err, id)
		}
	}
	if _, err := NodeIDOf(d, dataDir, "node-b"); !errors.Is(err, ErrNodeIDMismatch) || !strings.Contains(err.Error(), id) {
		t.Fatalf("another id for the directory: %v, want ErrNodeIDMismatch naming %s", err, id)
	}

	other := filepath.Join(dataDir, "other")
	if err := vfs.MkdirAllDurable(d, other); err != nil {
		t.Fatal(err)
	}
	if got, err := NodeIDOf(d, other, "node-b"); err != nil || got != "node-b" {
		t.Fatalf("first start asking node-b: %q, %v", got, err)
	}
	crashed := d.Crash(sim.CrashPlan{}) // the id was durable before NodeIDOf returned
	if got, err := NodeIDOf(crashed, other, ""); err != nil || got != "node-b" {
		t.Fatalf("after a crash: %q, %v; want node-b", got, err)
	}
}

// TestNodeIDOf_RefusesBadIDsAndDamage: an id that cannot be a key's last
// element, a damaged id file and a failed write are errors, and a failed
// write leaves no id behind.
func TestNodeIDOf_RefusesBadIDsAndDamage(t *testing.T) {
	d := newTestDisk(t, 1)
	for _, bad := range []string{"a/b", strings.Repeat("x", 65), "naïve", "a b"} {
		if _, err := NodeIDOf(d, dataDir, bad); err == nil {
			t.Fatalf("node id %q taken", bad)
		}
	}
	d.Inject(sim.Fault{Op: sim.OpSync, Path: filepath.Join(dataDir, wire.NodeIDFileName+vfs.TempSuffix), Nth: 1, Err: syscall.EIO})
	if _, err := NodeIDOf(d, dataDir, "node-a"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a failed write of the id: %v, want EIO", err)
	}
	if ok, _ := vfs.Exists(d, filepath.Join(dataDir, wire.NodeIDFileName)); ok {
		t.Fatal("a failed write left an id file")
	}
	if err := vfs.WriteFileAtomic(d, filepath.Join(dataDir, wire.NodeIDFileName), []byte("no/de\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := NodeIDOf(d, dataDir, ""); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a damaged id file: %v", err)
	}
}
