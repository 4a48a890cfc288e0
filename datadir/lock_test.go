package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
)

// TestLock_OneHolderAtATime: a second Acquire of a held data directory is
// ErrLocked naming the holder's pid, and writes nothing there; InUse
// names the holder while the lock is held and none once it is released,
// when the directory can be taken again. A directory never locked is not
// in use.
func TestLock_OneHolderAtATime(t *testing.T) {
	d := newTestDisk(t, 1)
	if _, inUse, err := InUse(d, dataDir); err != nil || inUse {
		t.Fatalf("a directory never locked: in use %v, %v", inUse, err)
	}
	first, err := Acquire(d, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if first.Dir() != dataDir {
		t.Fatalf("the lock's directory is %q, want %q", first.Dir(), dataDir)
	}
	holder := fmt.Sprintf("process %d", os.Getpid())
	before := d.Hash()
	if _, err := Acquire(d, dataDir); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), holder) {
		t.Fatalf("a second holder: %v, want ErrLocked naming %s", err, holder)
	}
	if d.Hash() != before {
		t.Fatal("the refused holder changed the data directory")
	}
	if got, inUse, err := InUse(d, dataDir); err != nil || !inUse || got != holder {
		t.Fatalf("InUse while held = %q, %v, %v; want %q", got, inUse, err, holder)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if _, inUse, err := InUse(d, dataDir); err != nil || inUse {
		t.Fatalf("InUse once released = %v, %v", inUse, err)
	}
	second, err := Acquire(d, dataDir)
	if err != nil {
		t.Fatalf("once released: %v", err)
	}
	if err := second.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestLock_AMissingDirectoryIsCreatedDurably: Acquire creates a missing
// data directory and its parents, and a crash right after keeps them.
func TestLock_AMissingDirectoryIsCreatedDurably(t *testing.T) {
	d := newTestDisk(t, 1)
	dir := filepath.Join(dataDir, "nodes", "a")
	lock, err := Acquire(d, dir)
	if err != nil {
		t.Fatal(err)
	}
	crashed := d.Crash(sim.CrashPlan{})
	if ok, err := vfs.Exists(crashed, dir); !ok || err != nil {
		t.Fatalf("the created directory after a crash: exists %v, %v", ok, err)
	}
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
}
