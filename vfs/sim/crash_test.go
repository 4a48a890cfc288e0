package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/narad-io/storage/vfs"
)

// newSynced returns a disk holding /d/f with content synced, its name
// durable, and f open for more writes.
func newSynced(t *testing.T, content []byte) (*Disk, vfs.File) {
	t.Helper()
	d := NewDisk(7)
	if err := d.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	f, err := d.OpenFile("/d/f", os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteAt(content, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	return d, f
}

func contents(t *testing.T, d *Disk, name string) []byte {
	t.Helper()
	b, err := d.Contents(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sectors(n int, fill byte) []byte { return bytes.Repeat([]byte{fill}, n*SectorSize) }

func TestCrash_DropUnsyncedKeepsOnlySyncedData(t *testing.T) {
	d, f := newSynced(t, sectors(1, 'a'))
	if _, err := f.WriteAt(sectors(2, 'b'), SectorSize); err != nil {
		t.Fatal(err)
	}
	if !d.Pending("/d/f") {
		t.Fatal("an unsynced write is not pending")
	}
	got := contents(t, d.Crash(CrashPlan{Data: DropUnsynced}), "/d/f")
	if !bytes.Equal(got, sectors(1, 'a')) {
		t.Fatalf("after the crash: %d bytes, want the synced sector alone", len(got))
	}
	// The disk that crashed is unchanged: one history, many crashes.
	if got := contents(t, d, "/d/f"); len(got) != 3*SectorSize {
		t.Fatalf("original disk changed: %d bytes", len(got))
	}
}

func TestCrash_KeepUnsyncedAppliesEveryChange(t *testing.T) {
	d, f := newSynced(t, sectors(2, 'a'))
	f.WriteAt(sectors(1, 'b'), 2*SectorSize)
	f.Truncate(SectorSize + 10)
	f.WriteAt([]byte("zz"), 0)
	want := append([]byte("zz"), sectors(2, 'a')[2:SectorSize+10]...)
	if got := contents(t, d.Crash(CrashPlan{Data: KeepUnsynced}), "/d/f"); !bytes.Equal(got, want) {
		t.Fatalf("after the crash: %q..., %d bytes; want %d bytes", got[:4], len(got), len(want))
	}
}

// TestCrash_TearChosenSectors: the chosen subset of the unsynced sectors
// reaches the media, the rest keep their old content.
func TestCrash_TearChosenSectors(t *testing.T) {
	d, f := newSynced(t, sectors(4, 'a'))
	f.WriteAt(sectors(4, 'b'), 0)
	img := contents(t, d.Crash(CrashPlan{
		Data:        TearUnsynced,
		KeepSector:  func(_ string, s int64) bool { return s == 1 || s == 3 },
		KeepNewSize: func(string) bool { return true },
	}), "/d/f")
	want := append(append(append(sectors(1, 'a'), sectors(1, 'b')...), sectors(1, 'a')...), sectors(1, 'b')...)
	if !bytes.Equal(img, want) {
		t.Fatal("torn image is not sectors a b a b")
	}
}

// TestCrash_NewSizeWithoutData: the size reached the media, the data did
// not: a zero-filled tail (docs/design.md, "Recovery"; docs/durability.md
// row 5).
func TestCrash_NewSizeWithoutData(t *testing.T) {
	d, f := newSynced(t, sectors(1, 'a'))
	f.WriteAt(sectors(2, 'b'), SectorSize)
	img := contents(t, d.Crash(CrashPlan{
		Data:        TearUnsynced,
		KeepSector:  func(_ string, s int64) bool { return s == 1 },
		KeepNewSize: func(string) bool { return true },
	}), "/d/f")
	want := append(append(sectors(1, 'a'), sectors(1, 'b')...), make([]byte, SectorSize)...)
	if !bytes.Equal(img, want) {
		t.Fatal("image is not a, b, then a zero-filled sector")
	}
	// The old size with the data kept: what lay past it is gone.
	img = contents(t, d.Crash(CrashPlan{
		Data:        TearUnsynced,
		KeepSector:  func(string, int64) bool { return true },
		KeepNewSize: func(string) bool { return false },
	}), "/d/f")
	if !bytes.Equal(img, sectors(1, 'a')) {
		t.Fatalf("old size kept: %d bytes, want %d", len(img), SectorSize)
	}
}

func TestCrash_TearIsPartialWithinASector(t *testing.T) {
	d, f := newSynced(t, sectors(1, 'a'))
	f.WriteAt([]byte("bb"), 100) // dirties sector 0 only
	img := contents(t, d.Crash(CrashPlan{
		Data:       TearUnsynced,
		KeepSector: func(_ string, s int64) bool { return s != 0 },
	}), "/d/f")
	if !bytes.Equal(img, sectors(1, 'a')) {
		t.Fatal("a dropped sector changed")
	}
}

func TestCrash_GarbageFillsDroppedSectors(t *testing.T) {
	d, f := newSynced(t, sectors(1, 'a'))
	f.WriteAt(sectors(2, 'b'), SectorSize)
	img := contents(t, d.Crash(CrashPlan{
		Data:        TearUnsynced,
		Garbage:     true,
		KeepSector:  func(string, int64) bool { return false },
		KeepNewSize: func(string) bool { return true },
	}), "/d/f")
	if len(img) != 3*SectorSize || !bytes.Equal(img[:SectorSize], sectors(1, 'a')) {
		t.Fatal("synced sector damaged or size wrong")
	}
	tail := img[SectorSize:]
	if bytes.Equal(tail, make([]byte, len(tail))) || bytes.Contains(tail, []byte("bbbbbbbb")) {
		t.Fatal("dropped sectors are zeros or the written data, not garbage")
	}
}

// TestCrash_RandomTearIsDeterministic: the same seeds give the same image;
// other seeds give other images (deterministic from a seed).
func TestCrash_RandomTearIsDeterministic(t *testing.T) {
	d, f := newSynced(t, nil)
	f.WriteAt(sectors(16, 'b'), 0)
	plan := CrashPlan{Data: TearUnsynced, Seed: 42}
	first := d.Crash(plan).Hash()
	if again := d.Crash(plan).Hash(); again != first {
		t.Fatal("same seed, different images")
	}
	distinct := map[uint64]bool{}
	for seed := range uint64(20) {
		distinct[d.Crash(CrashPlan{Data: TearUnsynced, Seed: seed}).Hash()] = true
	}
	if len(distinct) < 10 {
		t.Fatalf("20 seeds gave %d distinct images", len(distinct))
	}
}

// TestCrash_DirectoryEntriesNeedSyncDir: a create, rename or unlink is
// lost at a power loss unless its directory was synced (docs/design.md R7).
func TestCrash_DirectoryEntriesNeedSyncDir(t *testing.T) {
	d, _ := newSynced(t, []byte("old"))
	g, err := d.OpenFile("/d/new", os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("new"))
	g.Sync() // data synced, but the name is not
	g.Close()
	if err := d.Rename("/d/f", "/d/renamed"); err != nil {
		t.Fatal(err)
	}

	lost := d.Crash(CrashPlan{})
	if ok, _ := vfs.Exists(lost, "/d/new"); ok {
		t.Fatal("a create survived without a directory sync")
	}
	if got := contents(t, lost, "/d/f"); string(got) != "old" {
		t.Fatalf("rename without a directory sync: /d/f = %q", got)
	}
	if ok, _ := vfs.Exists(lost, "/d/renamed"); ok {
		t.Fatal("a rename survived without a directory sync")
	}

	// A prefix of the changes, oldest first.
	prefix := d.Crash(CrashPlan{KeepNameOps: 1})
	if got := contents(t, prefix, "/d/new"); string(got) != "new" {
		t.Fatalf("first change kept: /d/new = %q", got)
	}
	if ok, _ := vfs.Exists(prefix, "/d/renamed"); ok {
		t.Fatal("second change kept with KeepNameOps 1")
	}

	if err := d.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("/d/new"); err != nil {
		t.Fatal(err)
	}
	synced := d.Crash(CrashPlan{})
	if got := contents(t, synced, "/d/renamed"); string(got) != "old" {
		t.Fatalf("synced rename: %q", got)
	}
	if ok, _ := vfs.Exists(synced, "/d/f"); ok {
		t.Fatal("the old name of a synced rename is back")
	}
	if got := contents(t, synced, "/d/new"); string(got) != "new" {
		t.Fatalf("an unlink survived without a directory sync: %q", got)
	}
	if err := d.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := vfs.Exists(d.Crash(CrashPlan{}), "/d/new"); ok {
		t.Fatal("a synced unlink did not survive")
	}
}

// TestCrash_OrphanedNamesVanish: a name made durable in a directory whose
// own entry never was is lost with it.
func TestCrash_OrphanedNamesVanish(t *testing.T) {
	d := NewDisk(1)
	if err := d.MkdirAll("/a/b"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, d, "/a/b/f", []byte("x"))
	if err := d.SyncDir("/a/b"); err != nil {
		t.Fatal(err)
	}
	c := d.Crash(CrashPlan{})
	if ok, _ := vfs.Exists(c, "/a/b/f"); ok {
		t.Fatal("file survived in a directory whose entry was lost")
	}
	entries, err := c.ReadDir("/")
	if err != nil || len(entries) != 0 {
		t.Fatalf("root after crash: %v %v", entries, err)
	}
}

func TestCrash_DirectoryRenameMovesChildren(t *testing.T) {
	d := NewDisk(1)
	d.MkdirAll("/t/orders/p00000")
	mustWriteSynced(t, d, "/t/orders/p00000/seg", []byte("s"))
	d.SyncDir("/")
	d.SyncDir("/t")
	d.SyncDir("/t/orders")
	d.SyncDir("/t/orders/p00000")
	if err := d.Rename("/t/orders", "/t/orders.stale-x"); err != nil {
		t.Fatal(err)
	}
	d.SyncDir("/t")
	c := d.Crash(CrashPlan{})
	if got := contents(t, c, "/t/orders.stale-x/p00000/seg"); string(got) != "s" {
		t.Fatalf("child of a renamed directory: %q", got)
	}
	if ok, _ := vfs.Exists(c, "/t/orders"); ok {
		t.Fatal("old directory name survived a synced rename")
	}
}

func TestProcessCrash_KeepsPageCacheAndPendingState(t *testing.T) {
	d, f := newSynced(t, sectors(1, 'a'))
	f.WriteAt(sectors(1, 'b'), SectorSize)
	p := d.ProcessCrash()
	if got := contents(t, p, "/d/f"); len(got) != 2*SectorSize {
		t.Fatalf("page cache after a process crash: %d bytes", len(got))
	}
	// Still unsynced: a power loss after the process crash drops it.
	if got := contents(t, p.Crash(CrashPlan{}), "/d/f"); len(got) != SectorSize {
		t.Fatalf("power loss after process crash: %d bytes, want %d", len(got), SectorSize)
	}
	// Writes through the old process's file do not reach the new disk.
	f.WriteAt([]byte("late"), 0)
	if got := contents(t, p, "/d/f"); bytes.HasPrefix(got, []byte("late")) {
		t.Fatal("a dead process's descriptor wrote into the new disk")
	}
}

func TestCrash_ResultHasNoPendingStateAndReadsAsWritten(t *testing.T) {
	d, f := newSynced(t, sectors(1, 'a'))
	f.WriteAt(sectors(1, 'b'), SectorSize)
	c := d.Crash(CrashPlan{Data: KeepUnsynced})
	if c.Pending("/d/f") {
		t.Fatal("crash image has pending changes")
	}
	if got := contents(t, c.Crash(CrashPlan{}), "/d/f"); len(got) != 2*SectorSize {
		t.Fatal("a kept change is not on the media of the new disk")
	}
	if _, err := c.Stat("/d/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of a missing file: %v", err)
	}
}

// TestCrash_RemovedDirectoryTakesItsEntriesWithIt: a directory is removed
// only once empty, so a durable removal of it carries the removals below
// it: after a power loss, a directory recreated under the same name never
// shows the old one's entries.
func TestCrash_RemovedDirectoryTakesItsEntriesWithIt(t *testing.T) {
	d := NewDisk(1)
	if err := d.MkdirAll("/data/topic/p0"); err != nil {
		t.Fatal(err)
	}
	mustWriteSynced(t, d, "/data/topic/p0/segment", []byte("old incarnation"))
	syncDirs(t, d, "/", "/data", "/data/topic", "/data/topic/p0")
	if err := d.RemoveAll("/data/topic"); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/data"); err != nil { // the removal of topic only
		t.Fatal(err)
	}
	if err := d.MkdirAll("/data/topic/p0"); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/data"); err != nil {
		t.Fatal(err)
	}
	after := d.Crash(CrashPlan{})
	if ok, _ := vfs.Exists(after, "/data/topic/p0/segment"); ok {
		t.Fatal("the removed directory's file came back under the new directory")
	}
	if ok, _ := vfs.Exists(after, "/data/topic"); !ok {
		t.Fatal("the new directory, synced, is gone")
	}
}

// TestCrash_ProcessCrashKeepsWhatARemovalCarries: a directory removal still
// pending at a process crash still carries the removals below it.
func TestCrash_ProcessCrashKeepsWhatARemovalCarries(t *testing.T) {
	d := NewDisk(1)
	if err := d.MkdirAll("/data/topic/p0"); err != nil {
		t.Fatal(err)
	}
	mustWriteSynced(t, d, "/data/topic/p0/segment", []byte("old incarnation"))
	syncDirs(t, d, "/", "/data", "/data/topic", "/data/topic/p0")
	if err := d.RemoveAll("/data/topic"); err != nil {
		t.Fatal(err)
	}
	d = d.ProcessCrash() // the kernel lives on: the removal is still pending
	if err := d.SyncDir("/data"); err != nil {
		t.Fatal(err)
	}
	if err := d.MkdirAll("/data/topic/p0"); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/data"); err != nil {
		t.Fatal(err)
	}
	after := d.Crash(CrashPlan{})
	if ok, _ := vfs.Exists(after, "/data/topic/p0/segment"); ok {
		t.Fatal("after a process crash, the removed directory's file came back under the new directory")
	}
}

// A directory renamed into D and removed with D: once D's removal is
// durable, a later sync of the directory it came from must not bring it
// (and its file) back.
// TestCrash_MovedIntoARemovedDirectoryStaysGone: a directory moved into
// one that is then removed goes with it, its own history carried in order.
func TestCrash_MovedIntoARemovedDirectoryStaysGone(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/data/x", "/data/D")
	syncDirs(t, d, "/", "/data")
	if err := d.Mkdir("/data/x/S"); err != nil {
		t.Fatal(err)
	}
	mustWriteSynced(t, d, "/data/x/S/f", []byte("gone"))
	if err := d.SyncDir("/data/x/S"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("/data/x/S", "/data/D/S"); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveAll("/data/D"); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/data"); err != nil { // D's removal durable
		t.Fatal(err)
	}
	if err := d.SyncDir("/data/x"); err != nil {
		t.Fatal(err)
	}
	after := d.Crash(CrashPlan{})
	if ok, _ := vfs.Exists(after, "/data/x/S/f"); ok {
		t.Fatal("a file moved into a removed directory came back at its old path")
	}
}

// A rename over an empty directory replaces it: the removals that emptied
// it must become durable with the rename, or a crash brings the old
// entries back under the directory that took its name.
// TestCrash_RenameOverAnEmptiedDirectory: a directory renamed over an
// emptied one replaces it as a removal would, carrying what emptied it.
func TestCrash_RenameOverAnEmptiedDirectory(t *testing.T) {
	d := NewDisk(1)
	if err := d.MkdirAll("/data/T"); err != nil {
		t.Fatal(err)
	}
	if err := d.Mkdir("/data/N"); err != nil {
		t.Fatal(err)
	}
	mustWriteSynced(t, d, "/data/T/old", []byte("old"))
	syncDirs(t, d, "/", "/data", "/data/T")
	if err := d.Remove("/data/T/old"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("/data/N", "/data/T"); err != nil { // T is empty
		t.Fatal(err)
	}
	if err := d.SyncDir("/data"); err != nil {
		t.Fatal(err)
	}
	after := d.Crash(CrashPlan{})
	if ok, _ := vfs.Exists(after, "/data/T/old"); ok {
		t.Fatal("the replaced directory's removed file came back under the directory that took its name")
	}
}

// TestCrash_RenameOverADirectoryIsAtomic: a rename that replaces an empty
// directory is one namespace change: no crash keeps the replacement
// without the rename.
func TestCrash_RenameOverADirectoryIsAtomic(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/data/T", "/data/N")
	syncDirs(t, d, "/", "/data")
	if err := d.Rename("/data/N", "/data/T"); err != nil {
		t.Fatal(err)
	}
	for keep := 0; keep <= d.PendingNameOps(); keep++ {
		if ok, _ := vfs.Exists(d.Crash(CrashPlan{KeepNameOps: keep}), "/data/T"); !ok {
			t.Fatalf("%d name ops kept: neither the old nor the new /data/T", keep)
		}
	}
}

// TestCrash_ASyncCarriesANodesEarlierChangesOnly: a sync carries a node's
// changes up to the one it forces, never a later change into a directory
// nobody synced.
func TestCrash_ASyncCarriesANodesEarlierChangesOnly(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/data/D/S", "/data/x", "/data/y")
	syncDirs(t, d, "/", "/data", "/data/D")
	if err := d.Rename("/data/D/S", "/data/x/S"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("/data/D"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("/data/x/S", "/data/y/S"); err != nil { // after D's removal, into a directory never synced
		t.Fatal(err)
	}
	if err := d.SyncDir("/data"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := vfs.Exists(d.Crash(CrashPlan{}), "/data/y/S"); ok {
		t.Fatal("a rename into a directory nobody synced became durable")
	}
}

// mkdirs creates each directory (and its parents) on d.
func mkdirs(t *testing.T, d *Disk, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		if err := d.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
	}
}

// syncDirs fsyncs each directory of d, in order.
func syncDirs(t *testing.T, d *Disk, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		if err := d.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnsyncedSectors_ListsWhatASyncWouldCarry: the sectors an explorer
// may keep or drop are those unsynced writes and truncates touched, and a
// sync empties the list.
func TestUnsyncedSectors_ListsWhatASyncWouldCarry(t *testing.T) {
	d, f := newSynced(t, sectors(4, 'a'))
	f.WriteAt([]byte("b"), SectorSize+10)
	f.WriteAt(sectors(2, 'c'), 4*SectorSize) // an append of two sectors
	got := d.UnsyncedSectors()
	if want := []int64{1, 4, 5}; len(got) != 1 || fmt.Sprint(got["/d/f"]) != fmt.Sprint(want) {
		t.Fatalf("unsynced sectors %v, want /d/f: %v", got, want)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := d.UnsyncedSectors(); len(got) != 0 {
		t.Fatalf("after a sync: %v, want none", got)
	}
}

// TestCrash_RenamedDirectoryKeepsItsUnsyncedEntries: an entry created in a
// directory whose own SyncDir never came stays the entry of that
// directory when a rename moves it: once the rename is durable, a later
// sync that carries the entry (here, the moved directory's removal) puts
// it under the new name, never back under the old one, where a new
// directory of that name would show it after a power loss.
func TestCrash_RenamedDirectoryKeepsItsUnsyncedEntries(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/data/topic/p0")
	syncDirs(t, d, "/", "/data", "/data/topic")
	if err := d.Mkdir("/data/topic/p0/unsynced-dir"); err != nil {
		t.Fatal(err)
	}
	mustWriteSynced(t, d, "/data/topic/p0/segment", []byte("old incarnation")) // its name never synced
	if err := d.Rename("/data/topic", "/data/topic.stale"); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/data"); err != nil { // the rename durable, p0's entries not
		t.Fatal(err)
	}
	if err := d.RemoveAll("/data/topic.stale"); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/data"); err != nil { // the removal, carrying p0's history
		t.Fatal(err)
	}
	mkdirs(t, d, "/data/topic/p0")
	syncDirs(t, d, "/data", "/data/topic")
	for _, plan := range []CrashPlan{{}, {KeepNameOps: -1}} {
		after := d.Crash(plan)
		for _, old := range []string{"/data/topic/p0/segment", "/data/topic/p0/unsynced-dir", "/data/topic.stale"} {
			if ok, _ := vfs.Exists(after, old); ok {
				t.Fatalf("%s came back after a power loss (plan %+v)", old, plan)
			}
		}
		if ok, _ := vfs.Exists(after, "/data/topic/p0"); !ok {
			t.Fatal("the new directory, synced, is gone")
		}
	}
	// The same history crashed before the removal: the entries, never
	// synced in their directory, may be lost, but only under the new name.
	d = NewDisk(1)
	mkdirs(t, d, "/data/topic/p0")
	syncDirs(t, d, "/", "/data", "/data/topic")
	mustWriteSynced(t, d, "/data/topic/p0/segment", []byte("old incarnation"))
	if err := d.Rename("/data/topic", "/data/topic.stale"); err != nil {
		t.Fatal(err)
	}
	if err := d.SyncDir("/data"); err != nil {
		t.Fatal(err)
	}
	after := d.Crash(CrashPlan{KeepNameOps: -1})
	if ok, _ := vfs.Exists(after, "/data/topic.stale/p0/segment"); !ok {
		t.Fatal("the entry, kept by the crash, is not under the directory's new name")
	}
	if ok, _ := vfs.Exists(after, "/data/topic"); ok {
		t.Fatal("the old name is back")
	}
}

// TestCrash_SyncDirIsOfTheDirectoryNotItsName: SyncDir makes durable the
// entries of the directory at that path now, whatever name it had when
// they were made, and not those of an earlier directory of that name.
func TestCrash_SyncDirIsOfTheDirectoryNotItsName(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/data/a")
	syncDirs(t, d, "/", "/data")
	mustWriteSynced(t, d, "/data/a/f", []byte("made in a")) // a not synced
	if err := d.Rename("/data/a", "/data/b"); err != nil {
		t.Fatal(err)
	}
	mkdirs(t, d, "/data/a")
	if err := d.SyncDir("/data/a"); err != nil { // the new a: holds nothing
		t.Fatal(err)
	}
	after := d.Crash(CrashPlan{})
	if ok, _ := vfs.Exists(after, "/data/a/f"); ok {
		t.Fatal("a sync of a new directory made the old one's entry durable under it")
	}
	if err := d.SyncDir("/data/b"); err != nil { // the old a, renamed: holds f
		t.Fatal(err)
	}
	after = d.Crash(CrashPlan{}) // the rename itself is not durable
	if ok, _ := vfs.Exists(after, "/data/a/f"); !ok {
		t.Fatal("a sync of the renamed directory did not make its entry durable")
	}
}

// TestCrash_ATruncateTearsNoByteBelowItsSizes: found by the simulator
// (internal/simulation). A log's close gives back the blocks reserved past
// its last frame with a truncate to the size the file already has, not
// synced; a power loss that tore sectors with garbage then garbled the
// synced frame in the sector holding that size. A truncate changes no byte
// below the smaller of the old and new sizes, so none may be torn.
func TestCrash_ATruncateTearsNoByteBelowItsSizes(t *testing.T) {
	content := bytes.Repeat([]byte{'x'}, 1000)
	for _, size := range []int64{1000, 700, 1300} { // the same size, shrinking, growing
		d, f := newSynced(t, content)
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		for _, keepSize := range []bool{false, true} {
			img := d.Crash(CrashPlan{Data: TearUnsynced, Garbage: true, KeepSector: func(string, int64) bool { return false },
				KeepNewSize: func(string) bool { return keepSize }})
			got, err := img.Contents("/d/f")
			if err != nil {
				t.Fatal(err)
			}
			low := min(size, int64(len(content)))
			if !bytes.Equal(got[:low], content[:low]) {
				t.Errorf("truncate to %d, new size kept %v: bytes below %d torn", size, keepSize, low)
			}
		}
	}
}
