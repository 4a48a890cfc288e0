package sim

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs"
)

// TestFault_FailedSyncMarksPagesClean: a failed fdatasync returns the error
// once and drops the dirty state without persisting it, as Linux does;
// reads still see the bytes, a crash loses them, and a later sync that
// "succeeds" brings nothing back (docs/design.md, "Fsync failure").
func TestFault_FailedSyncMarksPagesClean(t *testing.T) {
	d, f := newSynced(t, sectors(1, 'a'))
	in := d.Inject(Fault{Op: OpSync, Path: "/d/f", Nth: 1, Err: syscall.EIO})
	f.WriteAt(sectors(1, 'b'), SectorSize)
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync: %v, want EIO", err)
	}
	if in.Fired() != 1 {
		t.Fatalf("fired %d times", in.Fired())
	}
	if d.Pending("/d/f") {
		t.Fatal("failed sync left the pages dirty")
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if got := contents(t, d, "/d/f"); len(got) != 2*SectorSize {
		t.Fatal("reads no longer see the bytes a failed sync marked clean")
	}
	if got := contents(t, d.Crash(CrashPlan{Data: KeepUnsynced}), "/d/f"); len(got) != SectorSize {
		t.Fatalf("after a crash: %d bytes, want only the %d synced", len(got), SectorSize)
	}
	// DropCache shows what the media holds (docs/design.md R3).
	if err := f.DropCache(); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, d, "/d/f"); !bytes.Equal(got, sectors(1, 'a')) {
		t.Fatalf("after DropCache reads see %d bytes, want the media's %d", len(got), SectorSize)
	}
}

// TestFault_LyingSyncPersistsNothing: success is reported, nothing reaches
// the media (docs/design.md, "Drives that lie about fsync").
func TestFault_LyingSyncPersistsNothing(t *testing.T) {
	d, f := newSynced(t, sectors(1, 'a'))
	d.Inject(Fault{Op: OpSync, Nth: 1, Lie: true})
	f.WriteAt(sectors(1, 'b'), SectorSize)
	if err := f.Sync(); err != nil {
		t.Fatalf("lying sync returned %v", err)
	}
	if got := contents(t, d.Crash(CrashPlan{}), "/d/f"); len(got) != SectorSize {
		t.Fatalf("a lied-about write survived: %d bytes", len(got))
	}
	// The next, honest, sync persists everything still dirty.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, d.Crash(CrashPlan{}), "/d/f"); len(got) != 2*SectorSize {
		t.Fatalf("after an honest sync: %d bytes", len(got))
	}
}

func TestFault_LyingSyncDirPersistsNoName(t *testing.T) {
	d := NewDisk(1)
	mustWrite(t, d, "/f", []byte("x"))
	d.Inject(Fault{Op: OpSyncDir, Lie: true})
	if err := d.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := vfs.Exists(d.Crash(CrashPlan{}), "/f"); ok {
		t.Fatal("a name survived a lying directory sync")
	}
}

// TestFault_NthOccurrenceByOpAndPath: only the Nth matching call fails; the
// others, and calls on other paths or of other kinds, go through.
func TestFault_NthOccurrenceByOpAndPath(t *testing.T) {
	d := NewDisk(1)
	d.MkdirAll("/p")
	f, _ := d.OpenFile("/p/00000000000000000000.log", os.O_RDWR|os.O_CREATE)
	defer f.Close()
	g, _ := d.OpenFile("/p/hwm", os.O_RDWR|os.O_CREATE)
	defer g.Close()
	in := d.Inject(Fault{Op: OpWrite, Path: "/p/*.log", Nth: 3, Err: syscall.ENOSPC})
	for i := 1; i <= 4; i++ {
		if _, err := g.Write([]byte("h")); err != nil {
			t.Fatalf("write %d to another path failed: %v", i, err)
		}
		_, err := f.Write([]byte("x"))
		if (i == 3) != (err != nil) {
			t.Fatalf("write %d: %v", i, err)
		}
		if i == 3 && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write 3: %v, want ENOSPC", err)
		}
	}
	if in.Fired() != 1 {
		t.Fatalf("fired %d times, want 1", in.Fired())
	}
	if got := contents(t, d, "/p/00000000000000000000.log"); string(got) != "xxx" {
		t.Fatalf("content %q: the failed write must write nothing", got)
	}
}

func TestFault_StickyFailsFromNthOn(t *testing.T) {
	d := NewDisk(1)
	in := d.Inject(Fault{Op: OpOpen, Nth: 2, Sticky: true, Err: syscall.EIO})
	var errs []bool
	for range 4 {
		f, err := d.OpenFile("/f", os.O_RDWR|os.O_CREATE)
		errs = append(errs, err != nil)
		if err == nil {
			f.Close()
		}
	}
	if want := []bool{false, true, true, true}; !equalBools(errs, want) {
		t.Fatalf("failures %v, want %v", errs, want)
	}
	in.Remove()
	f, err := d.OpenFile("/f", os.O_RDWR)
	if err != nil {
		t.Fatalf("open after Remove: %v", err)
	}
	f.Close()
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFault_ShortWrite: part of the buffer reaches the file, then the call
// fails; a crash may keep or drop the part (docs/durability.md row 19).
func TestFault_ShortWrite(t *testing.T) {
	d, f := newSynced(t, nil)
	d.Inject(Fault{Op: OpWrite, Nth: 1, Short: 3})
	n, err := f.WriteAt([]byte("abcdef"), 0)
	if n != 3 || !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("short write = %d %v, want 3 ErrShortWrite", n, err)
	}
	d.Inject(Fault{Op: OpWrite, Nth: 1, Short: 2, Err: syscall.ENOSPC})
	n, err = f.WriteAt([]byte("XYZ"), 3)
	if n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("short write with ENOSPC = %d %v", n, err)
	}
	if got := contents(t, d, "/d/f"); string(got) != "abcXY" {
		t.Fatalf("content %q, want abcXY", got)
	}
}

// TestFault_ReadRangeEIO: a read fails only where it overlaps the damaged
// range, every time (sticky per sector, docs/durability.md row 9).
func TestFault_ReadRangeEIO(t *testing.T) {
	d, f := newSynced(t, sectors(4, 'a'))
	d.Inject(Fault{Op: OpRead, Path: "/d/f", Off: 2 * SectorSize, Len: SectorSize, Err: syscall.EIO})
	buf := make([]byte, SectorSize)
	for range 2 {
		if _, err := f.ReadAt(buf, 2*SectorSize); !errors.Is(err, syscall.EIO) {
			t.Fatalf("read of the bad sector: %v", err)
		}
		if _, err := f.ReadAt(buf, 1*SectorSize); err != nil {
			t.Fatalf("read of a good sector: %v", err)
		}
		if _, err := f.ReadAt(buf, 3*SectorSize); err != nil {
			t.Fatalf("read of a good sector: %v", err)
		}
	}
	if _, err := f.ReadAt(make([]byte, 2*SectorSize), SectorSize+1); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read spanning the bad sector: %v", err)
	}
}

func TestFault_RenameMatchesEitherPath(t *testing.T) {
	d := NewDisk(1)
	mustWrite(t, d, "/hwm.tmp", nil)
	d.Inject(Fault{Op: OpRename, Path: "/hwm", Err: syscall.EIO})
	if err := d.Rename("/hwm.tmp", "/hwm"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("rename onto the faulted path: %v", err)
	}
	if ok, _ := vfs.Exists(d, "/hwm.tmp"); !ok {
		t.Fatal("a failed rename moved the file")
	}
}

// TestInject_RefusesAFaultThatCannotBe: a fault that does nothing, a lie
// from a call other than a sync, or a short call other than a write is a
// test's mistake; Inject panics naming it, in the package's name.
func TestInject_RefusesAFaultThatCannotBe(t *testing.T) {
	for _, tc := range []struct {
		fault Fault
		want  string
	}{
		{Fault{Op: OpWrite}, "sim: a Fault needs Err, Lie or Short"},
		{Fault{Op: OpWrite, Lie: true}, "sim: only a sync can lie"},
		{Fault{Op: OpSync, Short: 1}, "sim: only a write can be short"},
	} {
		got := func() (msg any) {
			defer func() { msg = recover() }()
			NewDisk(1).Inject(tc.fault)
			return nil
		}()
		if got != tc.want {
			t.Errorf("Inject(%+v) panicked with %v; want %q", tc.fault, got, tc.want)
		}
	}
}

// TestHook_BlocksOneCallOnly: a hook that holds one call back does not
// hold back calls on other paths (how tests prove one topic's slow open
// does not stall another's produce).
func TestHook_BlocksOneCallOnly(t *testing.T) {
	d := NewDisk(1)
	release := make(chan struct{})
	entered := make(chan struct{})
	d.SetHook(func(c Call) error {
		if c.Op == OpOpen && c.Path == "/slow" {
			close(entered)
			<-release
		}
		return nil
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f, err := d.OpenFile("/slow", os.O_RDWR|os.O_CREATE)
		if err == nil {
			f.Close()
		}
	}()
	<-entered
	mustWrite(t, d, "/fast", []byte("x")) // would deadlock if the hook held the disk
	close(release)
	wg.Wait()
	if ok, _ := vfs.Exists(d, "/slow"); !ok {
		t.Fatal("the held call never completed")
	}
}

func TestHook_ErrorFailsTheCall(t *testing.T) {
	d := NewDisk(1)
	var trace []Call
	d.SetHook(func(c Call) error {
		trace = append(trace, c)
		if c.Op == OpMkdir {
			return syscall.EROFS
		}
		return nil
	})
	if err := d.Mkdir("/x"); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("mkdir: %v", err)
	}
	if len(trace) != 1 || trace[0].Op != OpMkdir || trace[0].Path != "/x" {
		t.Fatalf("trace %v", trace)
	}
}

// TestWriteFileAtomic_CrashAtEveryCall: a power loss after any call of the
// sequence, with any unsynced state, leaves the old content or the new,
// never a mix, a short file or nothing (docs/design.md R1).
func TestWriteFileAtomic_CrashAtEveryCall(t *testing.T) {
	old, replacement := []byte("old-content"), []byte("new")
	for stop := 1; ; stop++ {
		d := NewDisk(uint64(stop))
		if err := vfs.WriteFileAtomic(d, "/meta", old); err != nil {
			t.Fatal(err)
		}
		d.SyncDir("/")
		calls := 0
		var crashed []*Disk
		d.SetHook(func(c Call) error {
			calls++
			if calls == stop {
				return errStop
			}
			return nil
		})
		err := vfs.WriteFileAtomic(d, "/meta", replacement)
		d.SetHook(nil)
		for seed := range uint64(8) {
			crashed = append(crashed, d.Crash(CrashPlan{Data: TearUnsynced, Seed: seed, KeepNameOps: int(seed % 3)}))
		}
		crashed = append(crashed, d.Crash(CrashPlan{Data: KeepUnsynced, KeepNameOps: -1}))
		for _, c := range crashed {
			got := contents(t, c, "/meta")
			if !bytes.Equal(got, old) && !bytes.Equal(got, replacement) {
				t.Fatalf("stop at call %d: content %q", stop, got)
			}
			if err == nil && !bytes.Equal(got, replacement) {
				t.Fatalf("stop at call %d: WriteFileAtomic returned nil, crash left %q", stop, got)
			}
		}
		if err == nil {
			if stop < 5 {
				t.Fatalf("the sequence finished after %d calls: too few to be durable", stop)
			}
			return
		}
	}
}

var errStop = errors.New("stopped")

// TestCapacity_FullDiskRefusesAndFreeSaysSo: past SetCapacity's bytes a
// write fails with ENOSPC and writes nothing, past its inodes a create
// does; Free reports what is left, and a removal gives it back.
func TestCapacity_FullDiskRefusesAndFreeSaysSo(t *testing.T) {
	d := NewDisk(1)
	d.MkdirAll("/d")
	d.SetCapacity(vfs.Space{Bytes: 1000, Inodes: 3})
	free, err := d.Free("/d")
	if err != nil || free.Bytes != 1000 || free.Inodes != 2 { // /d holds one of the 3
		t.Fatalf("free %+v, %v; want 1000 bytes and 2 inodes", free, err)
	}
	mustWrite(t, d, "/d/a", make([]byte, 900))
	f, err := d.OpenFile("/d/a", os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 200), 900); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write past the capacity: %v, want ENOSPC", err)
	}
	if b, _ := d.Contents("/d/a"); len(b) != 900 {
		t.Fatalf("the refused write left %d bytes, want 900", len(b))
	}
	if free, _ := d.Free("/d"); free.Bytes != 100 {
		t.Fatalf("free bytes %d, want 100", free.Bytes)
	}
	mustWrite(t, d, "/d/b", nil)
	if _, err := d.OpenFile("/d/c", os.O_RDWR|os.O_CREATE); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a create past the inodes: %v, want ENOSPC", err)
	}
	f.Close() // an unlinked file's space returns at its last close
	if err := d.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	if free, _ := d.Free("/d"); free.Bytes != 1000 || free.Inodes != 1 {
		t.Fatalf("after a removal: %+v", free)
	}
}

// TestCapacity_AnUnlinkedOpenFileHoldsItsSpace: a file unlinked while open
// keeps its bytes until the last close, as on a real disk (found by
// review: the space came back at the unlink), and a crash keeps the
// disk's capacity.
func TestCapacity_AnUnlinkedOpenFileHoldsItsSpace(t *testing.T) {
	d := NewDisk(1)
	d.MkdirAll("/d")
	d.SetCapacity(vfs.Space{Bytes: 1000})
	mustWrite(t, d, "/d/a", make([]byte, 900))
	f, err := d.OpenFile("/d/a", os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	if free, _ := d.Free("/d"); free.Bytes != 100 {
		t.Fatalf("unlinked but open: %d bytes free, want 100", free.Bytes)
	}
	if _, err := f.WriteAt(make([]byte, 900), 900); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write past the capacity through the unlinked file: %v, want ENOSPC", err)
	}
	for name, after := range map[string]*Disk{"ProcessCrash": d.ProcessCrash(), "Crash": d.Crash(CrashPlan{})} {
		if free, _ := after.Free("/d"); free.Bytes > 1000 {
			t.Fatalf("after %s: %d bytes free on a 1,000-byte disk", name, free.Bytes)
		}
	}
	f.Close()
	if free, _ := d.Free("/d"); free.Bytes != 1000 {
		t.Fatalf("after the last close: %d bytes free, want 1000", free.Bytes)
	}
}
