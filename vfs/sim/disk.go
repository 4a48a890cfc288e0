package sim

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/narad-io/storage/vfs"
)

// SectorSize is the unit a simulated crash tears writes at.
const SectorSize = 512

// Disk is a simulated disk for tests. It keeps, for every file, what the
// running process reads (the page cache), what reached the media, and the
// changes made since the last sync; for the namespace, the names the process
// sees and the names a power loss would leave. From these it builds the
// state after a crash (Crash) in every mode the tests need, and it fails or
// lies on chosen calls (Inject, SetHook). It is safe for concurrent use and
// deterministic from its seed.
//
// Invariants, under mu:
//   - names holds every path that exists now, each parent directory
//     included; "/" and "." always exist and are in neither map.
//   - durable holds the entries on the media, by directory node (see
//     sim_names.go); pendingNames the changes since, oldest first. A power
//     loss leaves durable with a prefix of pendingNames replayed.
//   - for a file node, apply(durable, pending) is what a crash that keeps
//     every unsynced change leaves; cache equals it except after a failed
//     sync, where cache still holds the bytes the kernel marked clean.
type Disk struct {
	mu           sync.Mutex
	seed         uint64
	now          func() time.Time
	names        map[string]*node
	kids         map[string]map[string]struct{} // names by parent directory (setName, dropName)
	durable      entryMap
	pendingNames []nameOp
	faults       []*Injection
	hook         func(Call) error
	openFiles    int
	maxOpenFiles int                 // 0: no limit
	locks        map[string]*simFile // path -> the open file holding its lock
	capacity     vfs.Space           // 0: no limit (of bytes, of inodes)
	openNodes    map[*node]int       // file node -> its open descriptors: an unlinked file holds space until the last closes
}

// node is a file or a directory.
type node struct {
	dir     bool
	mode    os.FileMode
	mtime   time.Time
	cache   []byte   // what reads see
	durable []byte   // what reached the media
	pending []dataOp // changes since the last sync, in order
	// reserved is the end of the blocks Allocate reserved past the size
	// (0: none), until a truncate gives them back; a crash image holds
	// none.
	reserved int64
}

// space is what the node takes of the disk: its contents, or the blocks
// reserved past them.
func (n *node) space() int64 { return max(int64(len(n.cache)), n.reserved) }

// dataOp is one write or size change not yet synced.
type dataOp struct {
	truncate bool
	off      int64 // write offset, or the new size of a truncate
	data     []byte
}

// NewDisk returns an empty simulated disk whose random choices (torn
// sectors, garbage) derive from seed.
func NewDisk(seed uint64) *Disk {
	return &Disk{
		seed:    seed,
		now:     time.Now,
		names:   map[string]*node{},
		kids:    map[string]map[string]struct{}{},
		durable: entryMap{},
	}
}

var _ vfs.FS = (*Disk)(nil)

// SetClock sets the clock that stamps modification times.
func (d *Disk) SetClock(now func() time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.now = now
}

// SetMaxOpenFiles makes opens past n open files fail with EMFILE; 0 lifts
// the limit.
func (d *Disk) SetMaxOpenFiles(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.maxOpenFiles = n
}

// OpenFiles is the number of files open now (a descriptor-leak check).
func (d *Disk) OpenFiles() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.openFiles
}

func clean(name string) string { return path.Clean(strings.ReplaceAll(name, "\\", "/")) }

func isRoot(p string) bool { return p == "/" || p == "." }

func pathError(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// lookup returns the node at p; the roots are directories with no node.
func (d *Disk) lookup(p string) (n *node, root bool) {
	if isRoot(p) {
		return nil, true
	}
	return d.names[p], false
}

// parentIsDir reports whether p's parent exists and is a directory.
func (d *Disk) parentIsDir(p string) error {
	parent := path.Dir(p)
	if isRoot(parent) {
		return nil
	}
	n := d.names[parent]
	if n == nil {
		return syscall.ENOENT
	}
	if !n.dir {
		return syscall.ENOTDIR
	}
	return nil
}

// OpenFile implements FS.
func (d *Disk) OpenFile(name string, flag int) (vfs.File, error) {
	p := clean(name)
	if err := d.enter(Call{Op: OpOpen, Path: p, Flag: flag}); err != nil {
		return nil, pathError("open", name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.maxOpenFiles > 0 && d.openFiles >= d.maxOpenFiles {
		return nil, pathError("open", name, syscall.EMFILE)
	}
	n, root := d.lookup(p)
	if root || (n != nil && n.dir) {
		return nil, pathError("open", name, syscall.EISDIR)
	}
	switch {
	case n != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathError("open", name, syscall.EEXIST)
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathError("open", name, syscall.ENOENT)
	case n == nil:
		if err := d.parentIsDir(p); err != nil {
			return nil, pathError("open", name, err)
		}
		if !d.fitsLocked(0, 1) {
			return nil, pathError("open", name, syscall.ENOSPC)
		}
		n = &node{mode: vfs.FileMode, mtime: d.now()}
		d.setName(p, n)
		d.recordCreate(p, n)
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if flag&os.O_TRUNC != 0 && writable && n.space() > 0 {
		n.truncate(0, d.now())
	}
	d.openFiles++
	if d.openNodes == nil {
		d.openNodes = map[*node]int{}
	}
	d.openNodes[n]++
	return &simFile{disk: d, node: n, name: name, path: p,
		readable: flag&os.O_WRONLY == 0, writable: writable}, nil
}

// Lock implements FS: a lock lasts until its File is closed, and no lock
// survives Crash or ProcessCrash (the process that held it is gone).
func (d *Disk) Lock(name string) (vfs.File, error) {
	f, err := d.OpenFile(name, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	sf := f.(*simFile)
	if err := d.enter(Call{Op: OpLock, Path: sf.path}); err != nil {
		f.Close()
		return nil, pathError("flock", name, err)
	}
	d.mu.Lock()
	if holder := d.locks[sf.path]; holder != nil && holder.node == sf.node {
		d.mu.Unlock()
		f.Close()
		return nil, pathError("flock", name, vfs.ErrLocked)
	}
	if d.locks == nil {
		d.locks = map[string]*simFile{}
	}
	d.locks[sf.path] = sf
	sf.locked = true
	d.mu.Unlock()
	return f, nil
}

// LockHeld implements FS.
func (d *Disk) LockHeld(name string) (bool, error) {
	p := clean(name)
	if err := d.enter(Call{Op: OpStat, Path: p}); err != nil {
		return false, pathError("lock query", name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.names[p]
	if n == nil {
		return false, pathError("lock query", name, syscall.ENOENT)
	}
	holder := d.locks[p]
	return holder != nil && holder.node == n, nil
}

// Mkdir implements FS.
func (d *Disk) Mkdir(name string) error {
	p := clean(name)
	if err := d.enter(Call{Op: OpMkdir, Path: p}); err != nil {
		return pathError("mkdir", name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mkdirLocked(name, p)
}

func (d *Disk) mkdirLocked(name, p string) error {
	if n, root := d.lookup(p); root || n != nil {
		return pathError("mkdir", name, syscall.EEXIST)
	}
	if err := d.parentIsDir(p); err != nil {
		return pathError("mkdir", name, err)
	}
	if !d.fitsLocked(0, 1) {
		return pathError("mkdir", name, syscall.ENOSPC)
	}
	n := &node{dir: true, mode: vfs.DirMode | os.ModeDir, mtime: d.now()}
	d.recordCreate(p, n)
	d.setName(p, n)
	return nil
}

// MkdirAll implements FS.
func (d *Disk) MkdirAll(name string) error {
	p := clean(name)
	if err := d.enter(Call{Op: OpMkdir, Path: p}); err != nil {
		return pathError("mkdir", name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var missing []string
	for q := p; !isRoot(q); q = path.Dir(q) {
		n := d.names[q]
		if n != nil {
			if !n.dir {
				return pathError("mkdir", q, syscall.ENOTDIR)
			}
			break
		}
		missing = append(missing, q)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := d.mkdirLocked(missing[i], missing[i]); err != nil {
			return err
		}
	}
	return nil
}

// Remove implements FS.
func (d *Disk) Remove(name string) error {
	p := clean(name)
	if err := d.enter(Call{Op: OpRemove, Path: p}); err != nil {
		return pathError("remove", name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, root := d.lookup(p)
	if root {
		return pathError("remove", name, syscall.EBUSY)
	}
	if n == nil {
		return pathError("remove", name, syscall.ENOENT)
	}
	if n.dir && len(d.childrenLocked(p)) > 0 {
		return pathError("remove", name, syscall.ENOTEMPTY)
	}
	d.removeLocked(p, n)
	return nil
}

func (d *Disk) removeLocked(p string, n *node) {
	d.recordRemove(p, n)
	d.dropName(p)
}

// RemoveAll implements FS. It removes children before their directory, one
// unlink at a time, as the real call does.
func (d *Disk) RemoveAll(name string) error {
	p := clean(name)
	if err := d.enter(Call{Op: OpRemove, Path: p}); err != nil {
		return pathError("remove", name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if isRoot(p) {
		return pathError("remove", name, syscall.EBUSY)
	}
	// As os.RemoveAll does: each directory's entries in directory order
	// (a seeded shuffle here, as hash order is on ext4), a subdirectory
	// emptied when met, the directory itself last. A crash may cut it
	// after any of them.
	var doomed []string
	rng := rand.New(rand.NewPCG(d.seed, uint64(len(d.names))))
	var walk func(dir string)
	walk = func(dir string) {
		children := d.childrenLocked(dir)
		rng.Shuffle(len(children), func(i, j int) { children[i], children[j] = children[j], children[i] })
		for _, c := range children {
			if n := d.names[c]; n != nil && n.dir {
				walk(c)
			} else {
				doomed = append(doomed, c)
			}
		}
		doomed = append(doomed, dir)
	}
	if n := d.names[p]; n != nil && n.dir {
		walk(p)
	} else if n != nil {
		doomed = append(doomed, p)
	}
	for _, q := range doomed {
		d.removeLocked(q, d.names[q])
	}
	return nil
}

// Rename implements FS.
func (d *Disk) Rename(oldname, newname string) error {
	from, to := clean(oldname), clean(newname)
	if err := d.enter(Call{Op: OpRename, Path: from, Path2: to}); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, root := d.lookup(from)
	if root || n == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.ENOENT}
	}
	if err := d.parentIsDir(to); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	if from == to {
		return nil
	}
	if target, root := d.lookup(to); root || target != nil {
		if root || target.dir != n.dir {
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EISDIR}
		}
		if target.dir && len(d.childrenLocked(to)) > 0 {
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.ENOTEMPTY}
		}
	}
	if n.dir && strings.HasPrefix(to, from+"/") {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EINVAL}
	}
	var replaced *node
	if target, _ := d.lookup(to); target != nil && target.dir {
		replaced = target // goes with the rename, atomically, as a removal would
	}
	d.recordRename(from, to, n, replaced)
	moved := []string{from}
	if n.dir {
		moved = append(moved, d.descendantsLocked(from)...)
	}
	for _, q := range moved {
		nq := to + strings.TrimPrefix(q, from)
		d.setName(nq, d.names[q])
		d.dropName(q)
	}
	return nil
}

func (d *Disk) childrenLocked(dir string) []string {
	out := make([]string, 0, len(d.kids[dir]))
	for q := range d.kids[dir] {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// setName and dropName are the only writers of names: they keep kids, its
// index by parent directory, so a listing costs the directory's entries,
// not the disk's (a scale test holds 100,000 partitions).
func (d *Disk) setName(p string, n *node) {
	if _, ok := d.names[p]; !ok {
		dir := path.Dir(p)
		if d.kids[dir] == nil {
			d.kids[dir] = map[string]struct{}{}
		}
		d.kids[dir][p] = struct{}{}
	}
	d.names[p] = n
}

func (d *Disk) dropName(p string) {
	if _, ok := d.names[p]; !ok {
		return
	}
	delete(d.names, p)
	dir := path.Dir(p)
	delete(d.kids[dir], p)
	if len(d.kids[dir]) == 0 {
		delete(d.kids, dir)
	}
}

func (d *Disk) descendantsLocked(dir string) []string {
	var out []string
	prefix := dir + "/"
	if isRoot(dir) {
		prefix = ""
	}
	for q := range d.names {
		if strings.HasPrefix(q, prefix) && q != dir {
			out = append(out, q)
		}
	}
	sort.Strings(out)
	return out
}

// ReadDir implements FS.
func (d *Disk) ReadDir(name string) ([]vfs.DirEntry, error) {
	p := clean(name)
	if err := d.enter(Call{Op: OpReadDir, Path: p}); err != nil {
		return nil, pathError("readdir", name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, root := d.lookup(p)
	if !root && n == nil {
		return nil, pathError("readdir", name, syscall.ENOENT)
	}
	if !root && !n.dir {
		return nil, pathError("readdir", name, syscall.ENOTDIR)
	}
	var out []vfs.DirEntry
	for _, q := range d.childrenLocked(p) {
		out = append(out, vfs.DirEntry{Name: path.Base(q), IsDir: d.names[q].dir})
	}
	return out, nil
}

// Stat implements FS.
func (d *Disk) Stat(name string) (vfs.FileInfo, error) {
	p := clean(name)
	if err := d.enter(Call{Op: OpStat, Path: p}); err != nil {
		return vfs.FileInfo{}, pathError("stat", name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n, root := d.lookup(p)
	if root {
		return vfs.FileInfo{Name: path.Base(p), Mode: vfs.DirMode | os.ModeDir}, nil
	}
	if n == nil {
		return vfs.FileInfo{}, pathError("stat", name, syscall.ENOENT)
	}
	return n.info(path.Base(p)), nil
}

func (n *node) info(base string) vfs.FileInfo {
	return vfs.FileInfo{Name: base, Size: int64(len(n.cache)), Mode: n.mode, ModTime: n.mtime}
}

// SetCapacity makes the disk hold at most capacity's bytes (of file
// contents, as the process sees them) and inodes (files and directories);
// a write or create past either fails with ENOSPC, changing nothing, and
// Free reports what is left. A zero field lifts that limit.
func (d *Disk) SetCapacity(capacity vfs.Space) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capacity = capacity
}

// Free implements vfs.FS: what SetCapacity leaves, or a vast amount.
func (d *Disk) Free(name string) (vfs.Space, error) {
	p := clean(name)
	if err := d.enter(Call{Op: OpFree, Path: p}); err != nil {
		return vfs.Space{}, pathError("statfs", name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	const vast = 1 << 50
	free := vfs.Space{Bytes: vast, Inodes: vast}
	if d.capacity.Bytes > 0 {
		free.Bytes = d.capacity.Bytes - min(d.capacity.Bytes, d.usedBytesLocked())
	}
	if d.capacity.Inodes > 0 {
		free.Inodes = d.capacity.Inodes - min(d.capacity.Inodes, uint64(len(d.names)))
	}
	return free, nil
}

// usedBytesLocked is what the files hold (their contents, or the blocks
// reserved past them): those with a name, and those unlinked but still
// open (their space returns at the last close).
func (d *Disk) usedBytesLocked() uint64 {
	var n uint64
	for _, node := range d.names {
		n += uint64(node.space())
	}
	for node := range d.openNodes {
		if !d.namedLocked(node) {
			n += uint64(node.space())
		}
	}
	return n
}

// namedLocked reports whether node has a name now.
func (d *Disk) namedLocked(node *node) bool {
	for _, m := range d.names {
		if m == node {
			return true
		}
	}
	return false
}

// fitsLocked reports whether growing the disk's contents by grow bytes
// and its names by names stays within its capacity.
func (d *Disk) fitsLocked(grow int64, names int) bool {
	if d.capacity.Bytes > 0 && grow > 0 && d.usedBytesLocked()+uint64(grow) > d.capacity.Bytes {
		return false
	}
	return d.capacity.Inodes == 0 || names <= 0 || uint64(len(d.names)+names) <= d.capacity.Inodes
}
