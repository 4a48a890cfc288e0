package sim

import (
	"path"
	"syscall"
)

// The simulated disk's namespace durability, modelled as a journaling
// file system keeps it: a directory's entries belong to the directory (its
// node, its inode), not to a path. What reached the media is, for each
// directory node, the entries it holds there (Disk.durable); each change
// since is a nameOp on entries of directory nodes, and a power loss
// replays a prefix of them, oldest first, onto the media's entries, then
// reads the paths off by walking from the root. So an entry made in a
// directory stays that directory's whatever it is renamed to, a directory
// of the same name made later never shows it, and a directory no walk
// reaches (removed, or created but never made durable) takes its entries
// with it.
//
// SyncDir(D) makes durable the changes to D's entries and, so that what
// reaches the media is always a state the journal could commit in order,
// every earlier change they depend on: the earlier changes of the same
// nodes, the earlier changes to the same entries (an entry's history is
// committed in order), and, when a directory is removed or replaced, the
// earlier changes inside it.

// dirent names one entry: a directory node (nil for the root) and a name
// in it. A root entry's name is the path as the caller gave it ("/data" or
// "data"), so the paths a crash reads off are the ones the process used.
type dirent struct {
	dir  *node
	name string
}

// nameOp is one namespace change not yet made durable by a SyncDir.
type nameOp struct {
	kind string // "create", "remove", "rename"
	node *node
	from dirent // the entry removed or renamed; unset for create
	to   dirent // the entry created or renamed to; unset for remove
	// replaced is the (empty) directory a rename replaced, if any.
	replaced *node
}

// entryOf is the entry p names now; p's parent exists.
func (d *Disk) entryOf(p string) dirent {
	parent := path.Dir(p)
	if isRoot(parent) {
		return dirent{dir: nil, name: p}
	}
	return dirent{dir: d.names[parent], name: path.Base(p)}
}

func (d *Disk) recordCreate(p string, n *node) {
	d.pendingNames = append(d.pendingNames, nameOp{kind: "create", node: n, to: d.entryOf(p)})
}

func (d *Disk) recordRemove(p string, n *node) {
	d.pendingNames = append(d.pendingNames, nameOp{kind: "remove", node: n, from: d.entryOf(p)})
}

// recordRename is called before the live namespace moves: both parents
// are where they were, and neither is inside the moved directory.
func (d *Disk) recordRename(from, to string, n, replaced *node) {
	d.pendingNames = append(d.pendingNames, nameOp{kind: "rename", node: n, from: d.entryOf(from), to: d.entryOf(to), replaced: replaced})
}

// entries lists the entries a change touches.
func (op nameOp) entries() []dirent {
	switch op.kind {
	case "create":
		return []dirent{op.to}
	case "remove":
		return []dirent{op.from}
	}
	return []dirent{op.from, op.to}
}

// in reports whether the change touches an entry of directory dir.
func (op nameOp) in(dir *node) bool {
	for _, e := range op.entries() {
		if e.dir == dir {
			return true
		}
	}
	return false
}

// sharesEntry reports whether two changes touch one entry.
func (op nameOp) sharesEntry(other nameOp) bool {
	for _, a := range op.entries() {
		for _, b := range other.entries() {
			if a == b {
				return true
			}
		}
	}
	return false
}

// removedDir is the directory a change removes: a removed directory, or
// the one a rename replaced.
func (op nameOp) removedDir() *node {
	switch {
	case op.kind == "remove" && op.node.dir:
		return op.node
	case op.kind == "rename":
		return op.replaced
	}
	return nil
}

// entryMap is a namespace as directory node -> name -> node.
type entryMap map[*node]map[string]*node

func (m entryMap) get(e dirent) *node { return m[e.dir][e.name] }

func (m entryMap) set(e dirent, n *node) {
	if m[e.dir] == nil {
		m[e.dir] = map[string]*node{}
	}
	m[e.dir][e.name] = n
}

func (m entryMap) del(e dirent) { delete(m[e.dir], e.name) }

// clone copies m deeply enough that applying changes to the copy leaves m
// as it was.
func (m entryMap) clone() entryMap {
	out := make(entryMap, len(m))
	for dir, kids := range m {
		c := make(map[string]*node, len(kids))
		for name, n := range kids {
			c[name] = n
		}
		out[dir] = c
	}
	return out
}

// applyTo replays a namespace change onto the entries m.
func (op nameOp) applyTo(m entryMap) {
	switch op.kind {
	case "create":
		m.set(op.to, op.node)
	case "remove":
		if m.get(op.from) == op.node {
			m.del(op.from)
		}
	case "rename":
		if m.get(op.from) != op.node {
			// The create of the source never became durable; neither
			// does the name it was renamed to.
			return
		}
		m.del(op.from)
		m.set(op.to, op.node)
	}
}

// paths reads a namespace off m: every path a walk from the root reaches.
// Every node has at most one entry (a create is a node's first change, a
// rename takes its source entry away), so the walk meets no node twice: a
// cycle of directories, which changes carried out of order could leave,
// holds its own entries only and is never reached.
func (m entryMap) paths() map[string]*node {
	out := map[string]*node{}
	var walk func(dir *node, prefix string)
	walk = func(dir *node, prefix string) {
		for name, n := range m[dir] {
			p := name
			if dir != nil {
				p = prefix + "/" + name
			}
			out[p] = n
			if n.dir {
				walk(n, p)
			}
		}
	}
	walk(nil, "")
	return out
}

// imageLocked is the namespace a power loss keeping the first keep
// pending changes (all of them if keep < 0) leaves; the caller holds mu.
func (d *Disk) imageLocked(keep int) map[string]*node {
	m := d.durable.clone()
	if keep < 0 || keep > len(d.pendingNames) {
		keep = len(d.pendingNames)
	}
	for _, op := range d.pendingNames[:keep] {
		op.applyTo(m)
	}
	return m.paths()
}

// SyncDir implements FS: every pending namespace change to the
// directory's entries, and the earlier changes they depend on (see the
// top of this file), become durable.
func (d *Disk) SyncDir(name string) error {
	p := clean(name)
	err := d.enter(Call{Op: OpSyncDir, Path: p})
	lie := err == errLie
	if err != nil && !lie {
		return pathError("fsync", name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dir, root := d.lookup(p)
	if !root && (dir == nil || !dir.dir) {
		return pathError("fsync", name, syscall.ENOTDIR)
	}
	if lie {
		return nil
	}
	// upTo[n] is the index of n's latest change carried; every change of
	// n up to it is carried, none after.
	upTo := map[*node]int{}
	raise := func(n *node, i int) bool {
		if cur, ok := upTo[n]; ok && cur >= i {
			return false
		}
		upTo[n] = i
		return true
	}
	for i, op := range d.pendingNames {
		if op.in(dir) {
			raise(op.node, i)
		}
	}
	carry := make([]bool, len(d.pendingNames))
	for changed := true; changed; {
		changed = false
		for i, op := range d.pendingNames {
			if up, ok := upTo[op.node]; ok && !carry[i] && i <= up {
				carry[i], changed = true, true
			}
		}
		for i := len(d.pendingNames) - 1; i >= 0; i-- {
			if !carry[i] {
				continue
			}
			op := d.pendingNames[i]
			// The earlier changes to the same entries.
			for j := i - 1; j >= 0; j-- {
				if q := d.pendingNames[j]; !carry[j] && q.sharesEntry(op) && raise(q.node, j) {
					changed = true
				}
			}
			// A rename into another directory moves a node that may be
			// durable elsewhere: the destination's pending create (and
			// its parents') come first, or the node would be at no path
			// (rename is atomic). A rename within one directory needs
			// none: a directory not durable yet holds nothing durable,
			// and its missing parent sync stays a loss the model shows.
			if op.kind == "rename" && op.from.dir != op.to.dir {
				x, bound := op.to.dir, i
				for x != nil {
					k := -1
					for j := bound - 1; j >= 0; j-- {
						if q := d.pendingNames[j]; q.node == x && q.kind == "create" {
							k = j
							break
						}
					}
					if k < 0 {
						break
					}
					if raise(x, k) {
						changed = true
					}
					x, bound = d.pendingNames[k].to.dir, k
				}
			}
			// A directory is removed (or replaced) only once empty: the
			// changes that emptied it, inside it and its subdirectories,
			// come first.
			removed := op.removedDir()
			if removed == nil {
				continue
			}
			inside := map[*node]bool{removed: true}
			for j := i - 1; j >= 0; j-- {
				q := d.pendingNames[j]
				for _, e := range q.entries() {
					if e.dir != nil && inside[e.dir] {
						if raise(q.node, j) {
							changed = true
						}
						if q.node.dir {
							inside[q.node] = true
						}
						break
					}
				}
			}
		}
	}
	var rest []nameOp
	for i, op := range d.pendingNames {
		if carry[i] {
			op.applyTo(d.durable)
		} else {
			rest = append(rest, op)
		}
	}
	d.pendingNames = rest
	return nil
}
