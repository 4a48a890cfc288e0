package diskcheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// TestProbe_FlushSpeedAgainstTheThreshold: on a device with a volatile
// write cache, flushes faster than FastFlush are warned of as implausible,
// one at the threshold or slower passes; a device that says its cache is
// write-through is taken at its word however fast. Every check is in the
// report, in order, and a slow, healthy disk has no warning or error.
func TestProbe_FlushSpeedAgainstTheThreshold(t *testing.T) {
	through := ext4
	through.WriteCache = vfs.WriteThrough
	unknown := ext4
	unknown.Device, unknown.WriteCache = "", ""
	for _, c := range []struct {
		name string
		info vfs.FSInfo
		cost time.Duration
		want Severity
	}{
		{"a volatile cache answering in 2 us", ext4, 2 * time.Microsecond, Warning},
		{"just under the threshold", ext4, FastFlush - time.Nanosecond, Warning},
		{"at the threshold", ext4, FastFlush, OK},
		{"a flush of 200 us", ext4, 200 * time.Microsecond, OK},
		{"a slow disk, 8 ms", ext4, 8 * time.Millisecond, OK},
		{"no device to ask, 2 us", unknown, 2 * time.Microsecond, Warning},
		{"a write-through device, 2 us", through, 2 * time.Microsecond, OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, c.info, c.cost, c.cost)
			opts := f.options()
			opts.Budget = time.Hour // every round runs
			r := f.probe(t, opts)
			if r.Append.Samples != DefaultRounds || r.Overwrite.Samples != DefaultRounds || r.DirFsync.Samples != 2*DefaultRounds/dirEvery {
				t.Fatalf("samples: %d appends, %d overwrites, %d directory fsyncs", r.Append.Samples, r.Overwrite.Samples, r.DirFsync.Samples)
			}
			if r.Append.P50 != c.cost || r.Overwrite.P99 != c.cost || r.DirFsync.Max != c.cost {
				t.Fatalf("latencies on a clock moving %v a flush: append %+v, overwrite %+v, directory %+v", c.cost, r.Append, r.Overwrite, r.DirFsync)
			}
			fix := expectFinding(t, r, CheckFdatasync, c.want, "after an append").Fix
			if (c.want == Warning) != (fix != "") {
				t.Errorf("a %s with fix %q", c.want, fix)
			}
			for i, check := range Checks {
				if r.Findings[i].Check != check {
					t.Fatalf("finding %d is %s, want %s", i, r.Findings[i].Check, check)
				}
			}
			if c.want == OK && (r.Count(Warning) != 0 || r.Count(Error) != 0) {
				t.Fatalf("a healthy disk: %+v", r.Findings)
			}
		})
	}
}

// TestProbe_FastFlushCauses: the warning of implausibly fast flushes
// names a mount without barriers among the causes on a device's file
// system; on btrfs or ZFS, which have no single device to ask, the fix
// names their own devices and settings, not another file system; on a
// file system with no device at all (a tmpfs) the fix is fs_type's.
func TestProbe_FastFlushCauses(t *testing.T) {
	btrfs := vfs.FSInfo{Type: "btrfs"}
	zfs := vfs.FSInfo{Type: "zfs"}
	tmpfs := vfs.FSInfo{Type: "tmpfs"}
	for _, c := range []struct {
		info         vfs.FSInfo
		message, fix []string
		notFix       string
	}{
		{ext4, []string{"nobarrier", "barrier=0"}, []string{"findmnt", "nobarrier", "power-loss protection"}, "local disk"},
		{btrfs, []string{"btrfs"}, []string{"btrfs filesystem show", "power-loss protection"}, "local disk"},
		{zfs, []string{"zfs"}, []string{"sync=disabled", "zpool status"}, "local disk"},
		{tmpfs, []string{"no block device"}, []string{"fs_type"}, "zpool"},
	} {
		t.Run(c.info.Type, func(t *testing.T) {
			f := newFake(t, c.info, time.Microsecond, time.Microsecond)
			got := expectFinding(t, f.probe(t, f.options()), CheckFdatasync, Warning, c.message...)
			for _, w := range c.fix {
				if !strings.Contains(got.Fix, w) {
					t.Errorf("fix %q does not say %q", got.Fix, w)
				}
			}
			if strings.Contains(got.Fix, c.notFix) {
				t.Errorf("fix %q says %q", got.Fix, c.notFix)
			}
		})
	}
}

// TestProbe_Percentiles: p50, p99 and max are the samples at ranks
// floor(q*(n-1)), whatever their order: of 64 the p99 is the second
// largest.
func TestProbe_Percentiles(t *testing.T) {
	var samples []time.Duration
	for i := 100; i >= 1; i-- {
		samples = append(samples, time.Duration(i)*time.Microsecond)
	}
	l := summarize(samples, nil)
	if l.Samples != 100 || l.P50 != 50*time.Microsecond || l.P99 != 99*time.Microsecond || l.Max != 100*time.Microsecond {
		t.Fatalf("%+v", l)
	}
	if l := summarize(samples[36:], nil); l.Samples != 64 || l.P50 != 32*time.Microsecond || l.P99 != 63*time.Microsecond || l.Max != 64*time.Microsecond {
		t.Fatalf("64 samples: %+v", l)
	}
	if l := summarize(samples[99:], nil); l.P50 != time.Microsecond || l.P99 != time.Microsecond || l.Max != time.Microsecond {
		t.Fatalf("one sample: %+v", l)
	}
	if l := summarize(nil, nil); l != (Latency{}) {
		t.Fatalf("no sample: %+v", l)
	}
}

// TestProbe_FileSystemTypes: a tmpfs and a ramfs are warned of (fsync
// persists nothing), an overlay and a network file system with why; the
// file systems of disks pass; one the table does not know is taken at
// its word; an FS that cannot describe itself skips the check.
func TestProbe_FileSystemTypes(t *testing.T) {
	for typ, want := range map[string]Severity{"tmpfs": Warning, "ramfs": Warning, "overlayfs": Warning, "nfs": Warning, "fuse": Warning, "9p": Warning,
		"ext2/3/4": OK, "xfs": OK, "btrfs": OK, "zfs": OK, "0x12345678": OK} {
		t.Run(typ, func(t *testing.T) {
			f := newFake(t, vfs.FSInfo{Type: typ}, time.Millisecond, time.Millisecond)
			r := f.probe(t, f.options())
			got := expectFinding(t, r, CheckFSType, want, typ)
			if want == Warning && got.Fix == "" {
				t.Error("a warning without a fix")
			}
		})
	}
	t.Run("memory only, as the command judges it", func(t *testing.T) {
		for _, typ := range []string{"tmpfs", "ramfs"} {
			f := newFake(t, vfs.FSInfo{Type: typ}, time.Millisecond, time.Millisecond)
			opts := f.options()
			opts.MemoryFSIsError = true
			got := expectFinding(t, f.probe(t, opts), CheckFSType, Error, "gone at a reboot")
			if got.Fix == "" {
				t.Error("an error without a fix")
			}
		}
		f := newFake(t, vfs.FSInfo{Type: "overlayfs"}, time.Millisecond, time.Millisecond)
		opts := f.options()
		opts.MemoryFSIsError = true
		expectFinding(t, f.probe(t, opts), CheckFSType, Warning, "overlay")
	})
	t.Run("not described", func(t *testing.T) {
		d := sim.NewDisk(1)
		if err := d.MkdirAll(dataDir); err != nil {
			t.Fatal(err)
		}
		clock := &fakeClock{}
		r, err := Probe(context.Background(), Options{Dir: dataDir, FS: d, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		expectFinding(t, r, CheckFSType, Skipped, "FSDescriber")
		expectFinding(t, r, CheckFdatasync, Warning, "implausibly fast") // no time passes on this clock
	})
}

// TestProbe_FallocateUnsupported: a file system without fallocate (as
// EOPNOTSUPP says) is a warning that names it, not an error; another
// failure is a warning with its error; the rest of the probe goes on.
func TestProbe_FallocateUnsupported(t *testing.T) {
	for _, c := range []struct {
		err   error
		words []string
	}{
		{syscall.EOPNOTSUPP, []string{"unsupported"}},
		{syscall.ENOSYS, []string{"unsupported"}},
		{syscall.ENOSPC, []string{"failed", "no space"}},
	} {
		t.Run(c.err.Error(), func(t *testing.T) {
			f := newFake(t, ext4, time.Millisecond, time.Millisecond)
			f.disk.Inject(sim.Fault{Op: sim.OpAllocate, Err: c.err})
			r := f.probe(t, f.options())
			expectFinding(t, r, CheckFallocate, Warning, c.words...)
			if !errors.Is(r.FallocateErr, c.err) || r.Fallocate {
				t.Fatalf("fallocate %v, %v", r.Fallocate, r.FallocateErr)
			}
			expectFinding(t, r, CheckFdatasync, OK)
			if r.Count(Error) != 0 {
				t.Fatalf("errors: %+v", r.Findings)
			}
		})
	}
	t.Run("works", func(t *testing.T) {
		f := newFake(t, ext4, time.Millisecond, time.Millisecond)
		r := f.probe(t, f.options())
		expectFinding(t, r, CheckFallocate, OK, "FALLOC_FL_KEEP_SIZE")
	})
}

// TestProbe_Floors: free bytes or inodes under the node's floor are an
// error (every produce would be refused); at or above it, or with the
// floor off, they pass; a failed statfs is an error.
func TestProbe_Floors(t *testing.T) {
	f := newFake(t, ext4, time.Millisecond, time.Millisecond)
	f.disk.SetCapacity(vfs.Space{Bytes: 100 << 20, Inodes: 500})
	free, err := f.disk.Free(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name               string
		floorBytes, inodes uint64
		bytesSev, inodeSev Severity
	}{
		{"under both", 256 << 20, 1000, Error, Error},
		{"at both", free.Bytes, free.Inodes, OK, OK},
		{"bytes under", free.Bytes + 1, 10, Error, OK},
		{"inodes under", 1 << 20, free.Inodes + 1, OK, Error},
		{"off", 0, 0, OK, OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := f.options()
			opts.MinFreeBytes, opts.MinFreeInodes = c.floorBytes, c.inodes
			r := f.probe(t, opts)
			expectFinding(t, r, CheckFreeBytes, c.bytesSev)
			expectFinding(t, r, CheckFreeInodes, c.inodeSev)
			if c.bytesSev == Error {
				expectFinding(t, r, CheckFreeBytes, Error, "507 no_space")
			}
		})
	}
	t.Run("statfs fails", func(t *testing.T) {
		in := f.disk.Inject(sim.Fault{Op: sim.OpFree, Err: syscall.EIO})
		defer in.Remove()
		r := f.probe(t, f.options())
		expectFinding(t, r, CheckFreeBytes, Error, "statfs failed")
		expectFinding(t, r, CheckFreeInodes, Error, "statfs failed")
	})
}

// TestProbe_Descriptors: an open-file limit under what the budget needs
// is a warning naming the limit to set; one that holds it, an unlimited
// one, or no budget pass; no descriptors given skips the check.
func TestProbe_Descriptors(t *testing.T) {
	f := newFake(t, ext4, time.Millisecond, time.Millisecond)
	for _, c := range []struct {
		name string
		d    *Descriptors
		want Severity
		word string
	}{
		{"under", &Descriptors{Limit: 256, OpenLogs: 16, Needed: 448}, Warning, "448"},
		{"exactly", &Descriptors{Limit: 448, OpenLogs: 16, Needed: 448}, OK, "holds"},
		{"unlimited", &Descriptors{Limit: Unlimited, OpenLogs: 16, Needed: 448}, OK, "unlimited"},
		{"no budget", &Descriptors{Limit: 256, OpenLogs: -1}, OK, "no open-log budget"},
		{"not given", nil, Skipped, "no open-log budget given"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := f.options()
			opts.Descriptors = c.d
			got := expectFinding(t, f.probe(t, opts), CheckDescriptors, c.want, c.word)
			if c.want == Warning && got.Fix == "" {
				t.Error("a warning without a fix")
			}
		})
	}
}

// TestProbe_BudgetBoundsTheRounds: with flushes of 10 ms on the clock, a
// budget of 100 ms stops the rounds once it is spent: the probe takes no
// more than the budget and one round (two flushes and two directory
// fsyncs), and says it stopped early.
func TestProbe_BudgetBoundsTheRounds(t *testing.T) {
	f := newFake(t, ext4, 10*time.Millisecond, time.Millisecond)
	opts := f.options()
	opts.Budget = 100 * time.Millisecond
	r := f.probe(t, opts)
	round := 2*f.syncCost + 2*f.dirCost
	if !r.BudgetSpent || r.Rounds >= r.RoundsPlanned || r.Rounds == 0 {
		t.Fatalf("%d of %d rounds, budget spent %v", r.Rounds, r.RoundsPlanned, r.BudgetSpent)
	}
	if r.Duration > opts.Budget+round {
		t.Fatalf("the probe took %v on a budget of %v, a round being at most %v", r.Duration, opts.Budget, round)
	}
	if f.syncs != 2*r.Rounds || r.Append.Samples != r.Rounds {
		t.Fatalf("%d fdatasyncs for %d rounds", f.syncs, r.Rounds)
	}
	// Rounds begin at 0, 22, 42, 62 and 82 ms; the one at 102 does not,
	// and the removal's directory fsync ends the probe at 103.
	if r.Rounds != 5 || r.Duration != 103*time.Millisecond {
		t.Fatalf("%d rounds in %v", r.Rounds, r.Duration)
	}
}

// TestProbe_FirstRoundAlwaysRuns: a budget spent before the first flush
// returns still gets one round, so every latency has a sample.
func TestProbe_FirstRoundAlwaysRuns(t *testing.T) {
	f := newFake(t, ext4, time.Second, time.Second)
	opts := f.options()
	opts.Budget = time.Nanosecond
	r := f.probe(t, opts)
	if r.Rounds != 1 || r.Append.Samples != 1 || r.Overwrite.Samples != 1 || r.DirFsync.Samples != 2 || !r.BudgetSpent {
		t.Fatalf("%+v", r)
	}
	expectFinding(t, r, CheckFdatasync, OK, "1s")
}

// TestProbe_ContextEndsTheRounds: a context that ends during the probe
// stops it after the round under way, with its error, and the probe's
// files are removed all the same.
func TestProbe_ContextEndsTheRounds(t *testing.T) {
	f := newFake(t, ext4, time.Millisecond, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.onSync = func(n int) {
		if n == 5 {
			cancel()
		}
	}
	opts := f.options()
	r, err := Probe(ctx, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled probe: %v", err)
	}
	if r.Rounds != 3 {
		t.Fatalf("%d rounds after a cancel in the third", r.Rounds)
	}
	f.expectNoProbeFiles(t)
	if _, err := Probe(ctx, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("a probe under an ended context: %v", err)
	}
}

// TestProbe_FailuresAreErrorsAndTheFilesGo: a write, an fdatasync, a
// directory fsync or the create that fails is an error finding naming
// it; the checks it left undone are skipped; and the probe's files are
// removed whatever failed.
func TestProbe_FailuresAreErrorsAndTheFilesGo(t *testing.T) {
	for _, c := range []struct {
		name    string
		fault   sim.Fault
		check   string
		skipped []string
	}{
		{"fdatasync", sim.Fault{Op: sim.OpSync, Nth: 3, Err: syscall.EIO}, CheckFdatasync, nil},
		{"write", sim.Fault{Op: sim.OpWrite, Nth: 2, Err: syscall.ENOSPC}, CheckFdatasync, nil},
		{"directory fsync", sim.Fault{Op: sim.OpSyncDir, Nth: 1, Err: syscall.EIO}, CheckDirFsync, nil},
		{"create", sim.Fault{Op: sim.OpOpen, Path: dataDir + "/" + wire.DiskCheckProbePrefix + "*", Nth: 1, Err: syscall.EACCES},
			CheckFdatasync, []string{CheckDirFsync, CheckFallocate}},
		{"lock", sim.Fault{Op: sim.OpLock, Nth: 1, Err: syscall.ENOLCK}, CheckFdatasync, []string{CheckDirFsync, CheckFallocate}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, ext4, time.Millisecond, time.Millisecond)
			f.disk.Inject(c.fault)
			r := f.probe(t, f.options())
			expectFinding(t, r, c.check, Error, c.fault.Err.Error())
			for _, check := range c.skipped {
				expectFinding(t, r, check, Skipped)
			}
			if r.Count(Error) != 1 {
				t.Fatalf("errors: %+v", r.Findings)
			}
		})
	}
}

// TestProbe_LeftoversOfACrashAreRemoved: a power loss during a probe
// leaves its files; the next probe removes them (and durably), leaves a
// running probe's files (locked) and every other file of the data
// directory alone, and says how many it removed.
func TestProbe_LeftoversOfACrashAreRemoved(t *testing.T) {
	f := newFake(t, ext4, time.Millisecond, time.Millisecond)
	for _, name := range []string{wire.TopicsDirName, wire.LostDirName} {
		if err := f.disk.Mkdir(filepath.Join(dataDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := vfs.WriteFileAtomic(f.disk, filepath.Join(dataDir, "metastore.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	var crashed *sim.Disk
	f.onSync = func(n int) {
		if n == 4 { // in the second round, after the first's directory samples
			crashed = f.disk.Crash(sim.CrashPlan{Data: sim.KeepUnsynced, KeepNameOps: -1})
		}
	}
	f.probe(t, f.options())
	if crashed == nil {
		t.Fatal("no crash taken")
	}
	before := probeFiles(t, crashed)
	if len(before) == 0 {
		t.Fatal("the crash left no probe file: the test proves nothing")
	}
	// A probe running beside (the command, while a node starts) holds its
	// file's lock.
	live, err := crashed.Lock(filepath.Join(dataDir, wire.DiskCheckProbePrefix+"0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	liveEntry := filepath.Join(dataDir, wire.DiskCheckProbePrefix+"0123456789abcdef"+wire.DiskCheckEntrySuffix)
	g, err := crashed.OpenFile(liveEntry, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()

	// A power loss right after the cleanup, as the new probe locks its
	// own file, drops what no directory fsync covered: the cleanup's
	// removals must not be among it.
	var again *sim.Disk
	crashed.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpLock && again == nil && !slices.Contains(before, filepath.Base(c.Path)) && c.Path != live.Name() {
			again = crashed.Crash(sim.CrashPlan{Data: sim.DropUnsynced})
		}
		return nil
	})
	clock := &fakeClock{}
	r, err := Probe(context.Background(), Options{Dir: dataDir, FS: describedDisk{Disk: crashed, info: ext4}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if again == nil {
		t.Fatal("no crash at the new probe's lock")
	}
	for _, name := range probeFiles(t, again) {
		if slices.Contains(before, name) {
			t.Errorf("%s came back after a crash right after the cleanup: its removal was not synced", name)
		}
	}
	if r.LeftoversRemoved != len(before) {
		t.Fatalf("removed %d leftovers of %v", r.LeftoversRemoved, before)
	}
	expectFinding(t, r, CheckProbeFiles, OK, "a crashed probe left")
	after := probeFiles(t, crashed)
	if len(after) != 2 || after[0] != filepath.Base(live.Name()) || after[1] != filepath.Base(liveEntry) {
		t.Fatalf("left %v, want the live probe's two files", after)
	}
	for _, name := range []string{wire.TopicsDirName, wire.LostDirName, "metastore.json"} {
		if ok, err := vfs.Exists(crashed, filepath.Join(dataDir, name)); err != nil || !ok {
			t.Fatalf("%s: %v, %v", name, ok, err)
		}
	}
}

func probeFiles(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	entries, err := fsys.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if len(e.Name) > len(wire.DiskCheckProbePrefix) && e.Name[:len(wire.DiskCheckProbePrefix)] == wire.DiskCheckProbePrefix {
			out = append(out, e.Name)
		}
	}
	return out
}

// TestProbe_NoDirectory: a directory that is missing, or a file, cannot be
// probed: an error, and nothing created.
func TestProbe_NoDirectory(t *testing.T) {
	f := newFake(t, ext4, time.Millisecond, time.Millisecond)
	if err := vfs.WriteFileAtomic(f.disk, "/file", nil); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"/absent", "/file"} {
		opts := f.options()
		opts.Dir = dir
		if _, err := Probe(context.Background(), opts); err == nil {
			t.Fatalf("%s probed", dir)
		}
	}
	if ok, _ := vfs.Exists(f.disk, "/absent"); ok {
		t.Fatal("the missing directory was created")
	}
}

// TestProbe_ConcurrentProbesLeaveEachOtherBe: a probe creates its file,
// then locks it (two calls). A second probe whose cleanup lists the
// directory between them finds the file unlocked; a third runs while the
// first measures a directory fsync, its entry created. Neither takes the
// first's files from it: the first finds no error on a healthy disk and
// takes every sample, the others none either, and nothing is left.
func TestProbe_ConcurrentProbesLeaveEachOtherBe(t *testing.T) {
	f := newFake(t, ext4, time.Millisecond, time.Millisecond)
	base := f.disk.Hook()
	var nested, atLock, atSyncDir bool
	var others []Report
	other := func() {
		nested = true
		defer func() { nested = false }()
		r, err := Probe(context.Background(), f.options())
		if err != nil {
			t.Errorf("a probe beside: %v", err)
		}
		others = append(others, r)
	}
	f.disk.SetHook(func(c sim.Call) error {
		if err := base(c); err != nil || nested {
			return err
		}
		switch {
		case c.Op == sim.OpLock && !atLock: // created, not yet locked
			atLock = true
			other()
		case c.Op == sim.OpSyncDir && atLock && !atSyncDir: // the entry created
			atSyncDir = true
			other()
		}
		return nil
	})
	opts := f.options()
	opts.Budget = time.Hour
	r := f.probe(t, opts)
	if !atSyncDir || len(others) != 2 {
		t.Fatalf("the interleaving did not happen: at the lock %v, at a directory fsync %v", atLock, atSyncDir)
	}
	for i, o := range append([]Report{r}, others...) {
		if n := o.Count(Error) + o.Count(Warning); n != 0 {
			t.Errorf("probe %d: %d errors and warnings: %+v", i, n, o.Findings)
		}
	}
	if r.Rounds != DefaultRounds || r.CreateErr != nil || r.DirFsync.Samples != 2*DefaultRounds/dirEvery {
		t.Fatalf("the first probe: %d rounds, %d directory samples, create %v", r.Rounds, r.DirFsync.Samples, r.CreateErr)
	}
	// The second took the first's file, not yet locked, for a leftover
	// (the first then took another name); the third took nothing.
	if others[0].LeftoversRemoved != 1 || others[1].LeftoversRemoved != 0 {
		t.Fatalf("leftovers removed: %d by the second, %d by the third", others[0].LeftoversRemoved, others[1].LeftoversRemoved)
	}
}

// TestProbe_LockRefusedTriesAnotherName: a cleanup that holds the lock of
// a probe's file created a moment before (it is about to remove it as a
// leftover) makes the probe's lock fail; the probe takes another name and
// finds nothing wrong.
func TestProbe_LockRefusedTriesAnotherName(t *testing.T) {
	f := newFake(t, ext4, time.Millisecond, time.Millisecond)
	base := f.disk.Hook()
	var cleanup vfs.File
	var taking bool
	f.disk.SetHook(func(c sim.Call) error {
		if err := base(c); err != nil || c.Op != sim.OpLock || taking || cleanup != nil {
			return err
		}
		taking = true
		var err error
		if cleanup, err = f.disk.Lock(c.Path); err != nil {
			t.Errorf("the cleanup's lock: %v", err)
		}
		return nil
	})
	r, err := Probe(context.Background(), f.options())
	if err != nil {
		t.Fatal(err)
	}
	if cleanup == nil {
		t.Fatal("no lock taken before the probe's")
	}
	if n := r.Count(Error) + r.Count(Warning); n != 0 || r.Rounds == 0 {
		t.Fatalf("%d rounds, findings %+v", r.Rounds, r.Findings)
	}
	if got := probeFiles(t, f.disk); len(got) != 1 || got[0] != filepath.Base(cleanup.Name()) {
		t.Fatalf("left %v, want only the name the cleanup holds", got)
	}
	if err := f.disk.Remove(cleanup.Name()); err != nil {
		t.Fatal(err)
	}
	cleanup.Close()
}
