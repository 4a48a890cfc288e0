package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"sort"
)

// DataLoss says what a power loss does to the changes a file had not synced.
type DataLoss int

const (
	// DropUnsynced: every unsynced write and size change is lost; the file
	// is as its last successful sync left it.
	DropUnsynced DataLoss = iota
	// KeepUnsynced: every unsynced change reached the media (in order).
	KeepUnsynced
	// TearUnsynced: each 512-byte sector an unsynced change touched reached
	// the media or did not, independently, and the file's size is either
	// the synced one or the new one, independently of its data. A new size
	// without its data reads as zeros (or as garbage, with Garbage).
	TearUnsynced
)

// CrashPlan describes one power loss. Its zero value drops every unsynced
// change, data and namespace alike.
type CrashPlan struct {
	Data DataLoss
	// Seed drives the random choices of TearUnsynced and Garbage; the same
	// disk seed, plan and history give the same image.
	Seed uint64
	// KeepSector, with TearUnsynced, chooses whether a sector (its index in
	// the file) reached the media; nil chooses at random.
	KeepSector func(path string, sector int64) bool
	// KeepNewSize, with TearUnsynced, chooses whether the file's new size
	// reached the media; nil chooses at random.
	KeepNewSize func(path string) bool
	// Garbage fills the sectors that did not reach the media, where an
	// unsynced change touched them, with random bytes instead of what was
	// there before (a sector torn mid-write).
	Garbage bool
	// KeepNameOps is how many of the namespace changes made since their
	// directory's last SyncDir reached the media, oldest first (a journaled
	// file system commits them in order). Negative keeps all of them.
	KeepNameOps int
}

// Crash returns the disk as a power loss under plan leaves it, rebooted:
// every file's content is what reached the media, nothing is pending, and
// no fault, hook or open file carries over. The receiver is left as it was,
// so one history can be crashed many ways.
func (d *Disk) Crash(plan CrashPlan) *Disk {
	d.mu.Lock()
	defer d.mu.Unlock()
	names := d.imageLocked(plan.KeepNameOps)

	rng := rand.New(rand.NewPCG(d.seed, plan.Seed))
	out := NewDisk(d.seed)
	out.capacity = d.capacity // the device's size outlives the power
	out.now = d.now
	copies := map[*node]*node{}
	for _, p := range sortedKeys(names) {
		n := names[p]
		c := &node{dir: n.dir, mode: n.mode, mtime: n.mtime}
		if !n.dir {
			c.durable = crashImage(p, n, plan, rng)
			c.cache = append([]byte(nil), c.durable...)
		}
		copies[n] = c
		out.setName(p, c)
	}
	// Everything on the media, as the paths say: the parents come first.
	for _, p := range sortedKeys(names) {
		out.durable.set(out.entryOf(p), copies[names[p]])
	}
	return out
}

// ProcessCrash returns the disk as a crash of the process alone leaves it:
// the kernel lives on, so the page cache, the unsynced changes and the
// namespace are all as they were. Only the open files are gone.
func (d *Disk) ProcessCrash() *Disk {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := NewDisk(d.seed)
	out.capacity = d.capacity // the device's size outlives the power
	out.now = d.now
	copies := map[*node]*node{}
	clone := func(n *node) *node {
		if c, ok := copies[n]; ok {
			return c
		}
		c := &node{dir: n.dir, mode: n.mode, mtime: n.mtime, reserved: n.reserved,
			cache:   append([]byte(nil), n.cache...),
			durable: append([]byte(nil), n.durable...),
			pending: append([]dataOp(nil), n.pending...)}
		copies[n] = c
		return c
	}
	for p, n := range d.names {
		out.setName(p, clone(n))
	}
	cloneDir := func(dir *node) *node {
		if dir == nil {
			return nil // the root
		}
		return clone(dir)
	}
	for dir, kids := range d.durable {
		for name, n := range kids {
			out.durable.set(dirent{dir: cloneDir(dir), name: name}, clone(n))
		}
	}
	for _, op := range d.pendingNames {
		op.node = clone(op.node)
		op.from.dir, op.to.dir = cloneDir(op.from.dir), cloneDir(op.to.dir)
		if op.replaced != nil {
			op.replaced = clone(op.replaced)
		}
		out.pendingNames = append(out.pendingNames, op)
	}
	return out
}

// crashImage is the content a file's media holds after the crash.
func crashImage(p string, n *node, plan CrashPlan, rng *rand.Rand) []byte {
	switch {
	case len(n.pending) == 0 || plan.Data == DropUnsynced:
		return append([]byte(nil), n.durable...)
	case plan.Data == KeepUnsynced:
		return n.applied()
	}
	target := n.applied()
	size := int64(len(n.durable))
	keepSize := rng.IntN(2) == 0
	if plan.KeepNewSize != nil {
		keepSize = plan.KeepNewSize(p)
	}
	if keepSize {
		size = int64(len(target))
	}
	img := resize(append([]byte(nil), n.durable...), size)
	for _, s := range dirtySectors(n) {
		lo := s * SectorSize
		if lo >= size {
			continue
		}
		hi := min(lo+SectorSize, size)
		kept := rng.IntN(2) == 0
		if plan.KeepSector != nil {
			kept = plan.KeepSector(p, s)
		}
		switch {
		case kept:
			clear(img[lo:hi])
			if lo < int64(len(target)) {
				copy(img[lo:hi], target[lo:min(hi, int64(len(target)))])
			}
		case plan.Garbage:
			for i := lo; i < hi; i++ {
				img[i] = byte(rng.Uint32())
			}
		}
	}
	return img
}

// dirtySectors lists, in order, the sectors whose content an unsynced
// change may have altered.
func dirtySectors(n *node) []int64 {
	set := map[int64]bool{}
	size := int64(len(n.durable))
	mark := func(lo, hi int64) {
		for s := lo / SectorSize; s*SectorSize < hi; s++ {
			set[s] = true
		}
	}
	for _, op := range n.pending {
		if op.truncate {
			// No byte below the smaller size changes: the sectors from
			// the first one wholly above it may (read back as zeros).
			low := (min(size, op.off) + SectorSize - 1) / SectorSize * SectorSize
			mark(low, max(size, op.off))
			size = op.off
			continue
		}
		mark(op.off, op.off+int64(len(op.data)))
		size = max(size, op.off+int64(len(op.data)))
	}
	out := make([]int64, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sortedKeys(m map[string]*node) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Hash identifies what the disk holds: every name and, for a file, its
// content with every unsynced change applied. For a crash image (nothing
// pending) that is the media itself; crash-state explorers use it to count
// distinct states.
func (d *Disk) Hash() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := fnv.New64a()
	for _, p := range sortedKeys(d.names) {
		n := d.names[p]
		h.Write([]byte(p))
		h.Write([]byte{0})
		if n.dir {
			h.Write([]byte{1})
			continue
		}
		h.Write(n.applied())
		h.Write([]byte{0})
	}
	return h.Sum64()
}
