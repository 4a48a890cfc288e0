package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/narad-io/storage/vfs"
)

// liveNames lists the paths the process sees now.
func liveNames(d *Disk) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return sortedKeys(d.names)
}

// crashNames lists the paths a power loss keeping every unsynced namespace
// change (and the first keep of them, if keep >= 0) leaves.
func crashNames(d *Disk, keep int) []string {
	return liveNames(d.Crash(CrashPlan{KeepNameOps: keep, Data: KeepUnsynced}))
}

// TestCrash_ASyncedRemoveFollowsItsDirectory: a removal synced in its
// directory, made after a rename of that directory that is still pending,
// is durable in that directory whatever its name: the removed entries
// never come back (a path-keyed model replayed it at the new name, matched
// nothing, and brought them back even in a crash keeping every change).
func TestCrash_ASyncedRemoveFollowsItsDirectory(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/data/topic/p0")
	mustWriteSynced(t, d, "/data/topic/p0/segment", []byte("x"))
	syncDirs(t, d, "/", "/data", "/data/topic", "/data/topic/p0")

	if err := d.Rename("/data/topic", "/data/topic.stale"); err != nil { // not synced
		t.Fatal(err)
	}
	if err := d.RemoveAll("/data/topic.stale/p0"); err != nil {
		t.Fatal(err)
	}
	syncDirs(t, d, "/data/topic.stale") // p0's removal durable

	live := liveNames(d)
	all := crashNames(d, -1)
	t.Logf("live:              %v", live)
	t.Logf("crash, keep all:   %v", all)
	t.Logf("crash, keep none:  %v", crashNames(d, 0))
	if fmt.Sprint(live) != fmt.Sprint(all) {
		t.Errorf("a crash keeping every change differs from the live namespace")
	}
	if ok, _ := vfs.Exists(d.Crash(CrashPlan{}), "/data/topic/p0"); ok {
		t.Errorf("p0's removal was synced in its directory, yet p0 is back")
	}
}

// TestCrash_ASyncedRenameFollowsItsDirectory: the same for a rename
// inside the directory: the synced rename d -> e is never lost.
func TestCrash_ASyncedRenameFollowsItsDirectory(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/p/a/d")
	syncDirs(t, d, "/", "/p", "/p/a")
	if err := d.Rename("/p/a", "/p/b"); err != nil { // not synced
		t.Fatal(err)
	}
	if err := d.Rename("/p/b/d", "/p/b/e"); err != nil {
		t.Fatal(err)
	}
	syncDirs(t, d, "/p/b") // the directory now holding e, not d
	live := liveNames(d)
	all := crashNames(d, -1)
	none := crashNames(d, 0)
	t.Logf("live:              %v", live)
	t.Logf("crash, keep all:   %v", all)
	t.Logf("crash, keep none:  %v", none)
	if fmt.Sprint(live) != fmt.Sprint(all) {
		t.Errorf("a crash keeping every change differs from the live namespace")
	}
	if ok, _ := vfs.Exists(d.Crash(CrashPlan{}), "/p/a/d"); ok {
		t.Errorf("the directory was synced holding e, yet a crash shows d in it")
	}
}

// TestCrash_ASyncedCreateStaysInItsDirectory: a create synced in its
// directory, made after a pending rename of that directory, is in that
// directory after a crash that drops the rename (at its old name), and
// never in another directory that takes the new name durably.
func TestCrash_ASyncedCreateStaysInItsDirectory(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/p/a", "/x/b", "/q")
	syncDirs(t, d, "/", "/p", "/x", "/q")
	if err := d.Rename("/p/a", "/p/b"); err != nil { // not synced
		t.Fatal(err)
	}
	mustWriteSynced(t, d, "/p/b/f", []byte("made in a"))
	syncDirs(t, d, "/p/b") // f durable in the directory first named a
	t.Logf("crash, keep none:  %v", crashNames(d, 0))
	if ok, _ := vfs.Exists(d.Crash(CrashPlan{}), "/p/a/f"); !ok {
		t.Errorf("f, synced in its directory, is not in it after a crash (the directory is at /p/a)")
	}

	// Move a away, then another directory, b, into the path /p/b, with a
	// sync that carries that rename alone.
	if err := d.Rename("/p/b", "/q/a"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("/x/b", "/p/b"); err != nil {
		t.Fatal(err)
	}
	syncDirs(t, d, "/x")
	t.Logf("live:              %v", liveNames(d))
	t.Logf("crash, keep none:  %v", crashNames(d, 0))
	if ok, _ := vfs.Exists(d.Crash(CrashPlan{}), "/p/b/f"); ok {
		t.Errorf("f, never made in directory b, shows up in it after a crash")
	}
}

// image is the namespace (original nodes) a power loss keeping the first
// keep pending namespace changes (all if keep < 0) leaves, as Crash builds
// it.
func image(d *Disk, keep int) map[string]*node {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.imageLocked(keep)
}

func pendingCount(d *Disk) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pendingNames)
}

func childrenOf(names map[string]*node, dir string) map[string]*node {
	out := map[string]*node{}
	for q, n := range names {
		if q != dir && path.Dir(q) == dir {
			out[path.Base(q)] = n
		}
	}
	return out
}

func sameChildren(a, b map[string]*node) bool {
	if len(a) != len(b) {
		return false
	}
	for k, n := range a {
		if b[k] != n {
			return false
		}
	}
	return true
}

// TestCrash_RandomNamespaceHistories runs random namespace histories and checks, after
// every call: (I1) a crash keeping everything is the live namespace; (I2)
// no crash prefix shows one node at two paths; (I3) right after SyncDir of
// a directory, a crash keeping nothing shows it (where it is reachable)
// with exactly its live entries; (I4) no crash prefix shows a node as the
// entry of a directory it never was in, under that name; (I5) a
// ProcessCrash copy taken midway, given the same calls, crashes the same.
func TestCrash_RandomNamespaceHistories(t *testing.T) {
	comps := []string{"a", "b", "c"}
	randPath := func(r *rand.Rand) string {
		depth := 1 + r.IntN(3)
		p := ""
		for i := 0; i < depth; i++ {
			p += "/" + comps[r.IntN(len(comps))]
		}
		return p
	}
	type edge struct {
		parent *node
		base   string
		child  *node
	}
	edgesOf := func(names map[string]*node) []edge {
		var out []edge
		for p, n := range names {
			var parent *node
			if !isRoot(path.Dir(p)) {
				parent = names[path.Dir(p)]
			}
			out = append(out, edge{parent, path.Base(p), n})
		}
		return out
	}
	failures := map[string]int{}
	firstLog := map[string]string{}
	const runs = 3000 // 30,000 were clean when the model changed to entries by directory node
	for seed := 0; seed < runs; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 99))
		d := NewDisk(uint64(seed))
		var pc *Disk
		everEdges := map[edge]bool{}
		var log []string
		fail := func(kind, msg string) {
			failures[kind]++
			if _, ok := firstLog[kind]; !ok || len(log) < strings.Count(firstLog[kind], "\n") {
				firstLog[kind] = fmt.Sprintf("seed %d: %s\n  %s\n", seed, msg, strings.Join(log, "\n  "))
			}
		}
	steps:
		for step := 0; step < 14; step++ {
			existing := liveNames(d)
			pick := func() string {
				if len(existing) == 0 {
					return randPath(r)
				}
				return existing[r.IntN(len(existing))]
			}
			if pc == nil && step == 5 {
				pc = d.ProcessCrash()
				log = append(log, "(process crash copy)")
			}
			var desc string
			var op func(*Disk) error
			synced := ""
			switch r.IntN(7) {
			case 0, 1:
				p := randPath(r)
				desc, op = "mkdir "+p, func(d *Disk) error { return d.Mkdir(p) }
			case 2:
				p := randPath(r)
				desc, op = "create "+p, func(d *Disk) error {
					f, err := d.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL)
					if err == nil {
						f.Close()
					}
					return err
				}
			case 3:
				p := pick()
				if r.IntN(2) == 0 {
					desc, op = "remove "+p, func(d *Disk) error { return d.Remove(p) }
				} else {
					desc, op = "removeall "+p, func(d *Disk) error { return d.RemoveAll(p) }
				}
			case 4, 5:
				from, to := pick(), randPath(r)
				if strings.HasPrefix(to+"/", from+"/") {
					continue
				}
				desc, op = "rename "+from+" "+to, func(d *Disk) error { return d.Rename(from, to) }
			case 6:
				dirs := []string{"/"}
				for _, p := range existing {
					if d.names[p].dir {
						dirs = append(dirs, p)
					}
				}
				p := dirs[r.IntN(len(dirs))]
				desc, op = "syncdir "+p, func(d *Disk) error { return d.SyncDir(p) }
				synced = p
			}
			err := op(d)
			if pc != nil {
				if err2 := op(pc); (err == nil) != (err2 == nil) {
					fail("I5", fmt.Sprintf("%s: %v on the disk, %v on its process-crash copy", desc, err, err2))
					break steps
				}
			}
			if err != nil {
				continue
			}
			log = append(log, desc)
			d.mu.Lock()
			live := map[string]*node{}
			for p, n := range d.names {
				live[p] = n
			}
			d.mu.Unlock()
			for _, e := range edgesOf(live) {
				everEdges[e] = true
			}
			// I1
			all := image(d, -1)
			if !sameChildren(all, live) {
				fail("I1", fmt.Sprintf("keep all %v != live %v", sortedKeys(all), sortedKeys(live)))
				break steps
			}
			for k := 0; k <= pendingCount(d); k++ {
				img := image(d, k)
				// I2
				seen := map[*node]string{}
				for _, p := range sortedKeys(img) {
					n := img[p]
					if q, ok := seen[n]; ok {
						fail("I2", fmt.Sprintf("keep %d: one node at %s and %s", k, q, p))
						break steps
					}
					seen[n] = p
				}
				// I4
				for _, e := range edgesOf(img) {
					if !everEdges[e] {
						fail("I4", fmt.Sprintf("keep %d: %v: an entry its directory never held", k, sortedKeys(img)))
						break steps
					}
				}
			}
			// I3
			if synced != "" {
				img := image(d, 0)
				liveKids := childrenOf(live, synced)
				if isRoot(synced) {
					if !sameChildren(childrenOf(img, "/"), liveKids) {
						fail("I3", fmt.Sprintf("after syncdir /: crash shows %v", sortedKeys(img)))
						break steps
					}
				} else {
					D := live[synced]
					for p, n := range img {
						if n == D && !sameChildren(childrenOf(img, p), liveKids) {
							fail("I3", fmt.Sprintf("after syncdir %s: it is at %s in the crash, holding %v; live: %v",
								synced, p, sortedKeys(childrenOf(img, p)), sortedKeys(liveKids)))
							break steps
						}
					}
				}
			}
			// I5
			if pc != nil {
				for k := -1; k <= pendingCount(d); k++ {
					a, b := crashNames(d, k), crashNames(pc, k)
					if fmt.Sprint(a) != fmt.Sprint(b) {
						fail("I5", fmt.Sprintf("keep %d: disk %v, process-crash copy %v", k, a, b))
						break steps
					}
				}
			}
		}
	}
	kinds := sortedKeysInt(failures)
	for _, k := range kinds {
		t.Errorf("%s: %d of %d runs; shortest:\n%s", k, failures[k], runs, firstLog[k])
	}
}

func sortedKeysInt(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestCrash_ANewDirectorysEntryNeverLandsInTheOldOne: a create synced in
// a new directory, whose name an earlier, still pending rename took from
// the old one (an old incarnation renamed aside, not durably), is in the
// new directory only, unreachable until the parent is synced; never mixed
// with the old directory's files, never carried along with it.
func TestCrash_ANewDirectorysEntryNeverLandsInTheOldOne(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/data/topic")
	mustWriteSynced(t, d, "/data/topic/old-seg", []byte("old"))
	syncDirs(t, d, "/", "/data", "/data/topic")
	if err := d.Rename("/data/topic", "/data/topic.old"); err != nil { // /data not synced
		t.Fatal(err)
	}
	mkdirs(t, d, "/data/topic")
	mustWriteSynced(t, d, "/data/topic/seg", []byte("new"))
	syncDirs(t, d, "/data/topic")
	t.Logf("live:              %v", liveNames(d))
	for k := 0; k <= 1; k++ {
		got := crashNames(d, k)
		t.Logf("crash, keep %d:     %v", k, got)
		for _, p := range got {
			if path.Base(p) == "seg" {
				t.Errorf("keep %d: the new directory's seg is at %s, in the old directory", k, p)
			}
		}
	}
}

// TestCrash_ADurableReplaceIsNotUndone: a rename over a file, made
// durable by a sync of the source's directory, carries the target's
// earlier create (an entry's history is committed in order), so no crash
// shows the old file at the name the rename replaced.
func TestCrash_ADurableReplaceIsNotUndone(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/a")
	syncDirs(t, d, "/")
	mustWriteSynced(t, d, "/a/c", []byte("old"))
	mustWriteSynced(t, d, "/tmp", []byte("new"))
	if err := d.Rename("/tmp", "/a/c"); err != nil {
		t.Fatal(err)
	}
	syncDirs(t, d, "/")
	for _, k := range []int{0, -1} {
		got := contents(t, d.Crash(CrashPlan{KeepNameOps: k}), "/a/c")
		t.Logf("crash, keep %d: /a/c = %q", k, got)
		if string(got) != "new" {
			t.Errorf("keep %d: /a/c = %q, want the durable rename's %q", k, got, "new")
		}
	}
}

// TestRename_IntoItsOwnSubtreeIsRefused: EINVAL, as on Linux.
func TestRename_IntoItsOwnSubtreeIsRefused(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/a")
	err := d.Rename("/a", "/a/b")
	t.Logf("rename /a /a/b: %v; names now %v", err, liveNames(d))
	if err == nil {
		t.Errorf("rename of a directory into itself succeeded")
	}
}

// TestCrash_ADurableRenameIsNotUndoneByAnEarlierName: a durable rename to
// a name whose earlier create and remove (another node, an earlier
// incarnation) were pending carries them, so no crash replays them after
// it and loses the renamed directory.
func TestCrash_ADurableRenameIsNotUndoneByAnEarlierName(t *testing.T) {
	d := NewDisk(1)
	for _, step := range []func() error{
		func() error { return d.Mkdir("/b") },
		func() error { return d.Remove("/b") },
		func() error { return d.Mkdir("/a") },
		func() error { return d.Mkdir("/a/b") },
		func() error { return d.Rename("/a/b", "/b") },
		func() error { return d.SyncDir("/a") }, // carries mkdir /a/b and the rename
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("live: %v", liveNames(d))
	for k := 0; k <= pendingCount(d); k++ {
		t.Logf("crash, keep %d: %v", k, crashNames(d, k))
	}
	if fmt.Sprint(crashNames(d, -1)) != fmt.Sprint(liveNames(d)) {
		t.Errorf("a crash keeping every change differs from the live namespace")
	}
}

// TestCrash_ASyncNeverLeavesADurableFileAtNoPath: a SyncDir that carries
// a rename into a directory whose create is pending carries that create
// too (and its parents'): a durable file moved into a new directory is,
// after a crash, at its old name or its new one, never at neither.
func TestCrash_ASyncNeverLeavesADurableFileAtNoPath(t *testing.T) {
	d := NewDisk(1)
	mustWriteSynced(t, d, "/d", []byte("durable"))
	syncDirs(t, d, "/")
	if err := d.Mkdir("/b"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("/d", "/b/d"); err != nil {
		t.Fatal(err)
	}
	before := crashNames(d, 0)
	syncDirs(t, d, "/b")
	after := crashNames(d, 0)
	t.Logf("live:                       %v", liveNames(d))
	t.Logf("crash keep 0, before sync:  %v", before)
	t.Logf("crash keep 0, after sync:   %v", after)
	for k := 0; k <= pendingCount(d); k++ {
		t.Logf("crash keep %d after sync:    %v", k, crashNames(d, k))
	}
	if len(after) == 0 {
		t.Errorf("a durable file is at no path after a crash, because a SyncDir carried its rename but not the mkdir of the destination")
	}

	// The same with the sync of the source directory (to make the move
	// out durable): /p/f, durable, is lost.
	d = NewDisk(1)
	mkdirs(t, d, "/p")
	syncDirs(t, d, "/")
	mustWriteSynced(t, d, "/p/f", []byte("durable"))
	syncDirs(t, d, "/p")
	mkdirs(t, d, "/x")
	if err := d.Rename("/p/f", "/x/f"); err != nil {
		t.Fatal(err)
	}
	syncDirs(t, d, "/p")
	t.Logf("second case, live %v; crash keep 0 after syncdir /p: %v", liveNames(d), crashNames(d, 0))
	if got := crashNames(d, 0); fmt.Sprint(got) == "[/p]" {
		t.Errorf("/p/f, durable, is at no path after a crash: SyncDir(/p) carried its rename to /x/f, not the mkdir of /x")
	}
}

// TestCrash_ARenameWithinANewDirectoryKeepsItsParentUnsynced: the atomic
// write of a file in a new directory (create a temporary, sync, rename,
// sync the directory) makes nothing durable while the directory's own
// entry is not: a missing sync of its parent still shows as a loss.
func TestCrash_ARenameWithinANewDirectoryKeepsItsParentUnsynced(t *testing.T) {
	d := NewDisk(1)
	mkdirs(t, d, "/data")
	syncDirs(t, d, "/")
	mkdirs(t, d, "/data/topic") // /data never synced
	mustWriteSynced(t, d, "/data/topic/marker.tmp", []byte("id"))
	if err := d.Rename("/data/topic/marker.tmp", "/data/topic/marker"); err != nil {
		t.Fatal(err)
	}
	syncDirs(t, d, "/data/topic")
	if ok, _ := vfs.Exists(d.Crash(CrashPlan{}), "/data/topic"); ok {
		t.Fatal("a sync inside a new directory made the directory's own entry durable")
	}
}
