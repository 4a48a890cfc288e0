package diskcheck

import (
	"context"
	"testing"

	"github.com/narad-io/storage/internal/tmpfstest"
	"github.com/narad-io/storage/vfs"
)

// The probe on this machine's file systems, through the real one. No
// latency is asserted: what a machine's flushes take is its own.

// TestProbe_OnATmpfsWarns: on a tmpfs the probe says so, a warning with
// what to do, and leaves nothing behind.
func TestProbe_OnATmpfsWarns(t *testing.T) {
	dir := tmpfstest.Dir(t)
	r, err := Probe(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.FS.Type != "tmpfs" {
		t.Fatalf("the file system is %+v, statfs said tmpfs", r.FS)
	}
	f := expectFinding(t, r, CheckFSType, Warning, "tmpfs", "fsync persists nothing")
	if f.Fix == "" {
		t.Error("no fix")
	}
	if r.Count(Warning) == 0 {
		t.Fatal("no warning counted")
	}
	expectNoProbeFiles(t, vfs.OS{}, dir)
	fd, _ := r.Finding(CheckFdatasync)
	t.Logf("fdatasync on a tmpfs: %s: %s", fd.Severity, fd.Message)
}

// TestProbe_OnTheRealDiskPasses: on the test's temporary directory the
// probe names the file system, takes every sample, finds no error, and
// leaves nothing behind.
func TestProbe_OnTheRealDiskPasses(t *testing.T) {
	dir := t.TempDir()
	r, err := Probe(context.Background(), Options{Dir: dir, MinFreeBytes: 1, MinFreeInodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.FSErr != nil || r.FS.Type == "" {
		t.Fatalf("the file system is not named: %+v, %v", r.FS, r.FSErr)
	}
	if r.Append.Samples == 0 || r.Overwrite.Samples == 0 || r.DirFsync.Samples == 0 || !r.Fallocate && r.FallocateErr == nil {
		t.Fatalf("samples missing: %+v", r)
	}
	if n := r.Count(Error); n != 0 {
		t.Fatalf("%d errors: %+v", n, r.Findings)
	}
	expectNoProbeFiles(t, vfs.OS{}, dir)
	for _, f := range r.Findings {
		t.Logf("%s %s: %s", f.Severity, f.Check, f.Message)
	}
}
