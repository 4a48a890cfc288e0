package vfs_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
)

// TestLock_ExclusiveUntilClosed: a second Lock of a locked file fails with
// ErrLocked, whatever holder asks, until the first holder closes its File;
// what the holder writes is readable by the refused caller.
func TestLock_ExclusiveUntilClosed(t *testing.T) {
	implementations(t, func(t *testing.T, fsys vfs.FS, root string) {
		name := filepath.Join(root, "LOCK")
		held, err := fsys.Lock(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := held.WriteAt([]byte("4242\n"), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Lock(name); !errors.Is(err, vfs.ErrLocked) {
			t.Fatalf("second lock: %v, want ErrLocked", err)
		}
		if held, err := fsys.LockHeld(name); err != nil || !held {
			t.Fatalf("LockHeld while held = %v, %v", held, err)
		}
		if got := string(mustRead(t, fsys, name)); got != "4242\n" {
			t.Fatalf("lock file holds %q", got)
		}
		if err := held.Close(); err != nil {
			t.Fatal(err)
		}
		if held, err := fsys.LockHeld(name); err != nil || held {
			t.Fatalf("LockHeld after release = %v, %v", held, err)
		}
		if _, err := fsys.LockHeld(filepath.Join(root, "absent")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("LockHeld of a missing file: %v", err)
		}
		again, err := fsys.Lock(name)
		if err != nil {
			t.Fatalf("lock after release: %v", err)
		}
		if err := again.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLock_NoLockSurvivesACrash: the process that held a lock is gone
// after a crash of either kind, and so is its lock.
func TestLock_NoLockSurvivesACrash(t *testing.T) {
	d := sim.NewDisk(1)
	held, err := d.Lock("/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for name, after := range map[string]*sim.Disk{"power loss": d.Crash(sim.CrashPlan{KeepNameOps: -1}), "process crash": d.ProcessCrash()} {
		f, err := after.Lock("/LOCK")
		if err != nil {
			t.Fatalf("%s: lock: %v", name, err)
		}
		f.Close()
	}
	if _, err := d.Lock("/LOCK"); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("the original disk lost its lock: %v", err)
	}
}

// TestMkdirAllDurable_EveryCreatedEntrySurvivesAPowerLoss: with no
// namespace change kept past the syncs it made, every directory it
// created is still there.
func TestMkdirAllDurable_EveryCreatedEntrySurvivesAPowerLoss(t *testing.T) {
	d := sim.NewDisk(1)
	if err := d.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := vfs.MkdirAllDurable(d, "/data/topics/orders/p00000"); err != nil {
		t.Fatal(err)
	}
	after := d.Crash(sim.CrashPlan{})
	for _, dir := range []string{"/data/topics", "/data/topics/orders", "/data/topics/orders/p00000"} {
		if ok, err := vfs.Exists(after, dir); err != nil || !ok {
			t.Fatalf("%s after a power loss: exists %v, %v", dir, ok, err)
		}
	}
	plain := sim.NewDisk(1)
	if err := plain.MkdirAll("/data/topics"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := vfs.Exists(plain.Crash(sim.CrashPlan{}), "/data/topics"); ok {
		t.Fatal("the crash image kept an unsynced directory: the test above proves nothing")
	}
}

// TestMkdirAllDurable_AFailedSyncIsRetriedByTheNextCall: a directory sync
// that fails takes back the directories the call created, so the caller's
// retry creates and syncs them again; left in place they would exist, and
// no retry would ever make their entries durable (found by the fault
// campaign).
func TestMkdirAllDurable_AFailedSyncIsRetriedByTheNextCall(t *testing.T) {
	d := sim.NewDisk(1)
	if err := d.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	d.Inject(sim.Fault{Op: sim.OpSyncDir, Path: "/data", Nth: 1, Err: syscall.EIO})
	if err := vfs.MkdirAllDurable(d, "/data/topics/orders"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("with the sync failing: %v, want EIO", err)
	}
	if ok, _ := vfs.Exists(d, "/data/topics"); ok {
		t.Fatal("the failed call left /data/topics in place")
	}
	if err := vfs.MkdirAllDurable(d, "/data/topics/orders"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := vfs.Exists(d.Crash(sim.CrashPlan{}), "/data/topics/orders"); !ok {
		t.Fatal("the retry's directories did not survive a power loss")
	}
}
