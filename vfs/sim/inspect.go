package sim

import "syscall"

// Contents returns what a read of name sees now (the page cache), for tests
// that check a file byte for byte.
func (d *Disk) Contents(name string) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.names[clean(name)]
	if n == nil || n.dir {
		return nil, pathError("contents", name, syscall.ENOENT)
	}
	return append([]byte(nil), n.cache...), nil
}

// Damage overwrites bytes of name on the media and in the cache alike, as a
// bit rot or a misdirected write would, without going through a File: no
// fault, hook or modification time applies. Writing past the end extends
// the file.
func (d *Disk) Damage(name string, off int64, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.names[clean(name)]
	if n == nil || n.dir {
		return pathError("damage", name, syscall.ENOENT)
	}
	n.durable = writeInto(append([]byte(nil), n.durable...), off, data)
	n.cache = writeInto(n.cache, off, data)
	return nil
}

// Pending reports whether name has changes no sync has carried to the
// media yet.
func (d *Disk) Pending(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.names[clean(name)]
	return n != nil && len(n.pending) > 0
}

// PendingNameOps is how many namespace changes (creates, removes, renames)
// no SyncDir has made durable yet: a crash explorer tries keeping each
// prefix of them (CrashPlan.KeepNameOps).
func (d *Disk) PendingNameOps() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pendingNames)
}

// UnsyncedSectors lists, for every file with changes no sync has carried
// to the media yet, the sectors those changes may have altered, in order:
// a crash explorer chooses which of them reach the media
// (CrashPlan.KeepSector).
func (d *Disk) UnsyncedSectors() map[string][]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string][]int64{}
	for p, n := range d.names {
		if !n.dir && len(n.pending) > 0 {
			out[p] = dirtySectors(n)
		}
	}
	return out
}
