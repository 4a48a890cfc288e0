package sim

import (
	"io"
	"os"
	"syscall"
	"time"

	"github.com/narad-io/storage/vfs"
)

// simFile is an open file of a Disk. It keeps working on its node after the
// name is removed, as a descriptor does.
type simFile struct {
	disk     *Disk
	node     *node
	name     string // as opened
	path     string // cleaned
	readable bool
	writable bool

	// Guarded by disk.mu.
	pos    int64
	closed bool
	locked bool // it holds its path's lock (Disk.Lock)
}

// release gives up the file's lock, if it holds one. Called with disk.mu
// held.
func (f *simFile) release() {
	if f.locked && f.disk.locks[f.path] == f {
		delete(f.disk.locks, f.path)
	}
	f.locked = false
	if f.disk.openNodes[f.node]--; f.disk.openNodes[f.node] <= 0 {
		delete(f.disk.openNodes, f.node)
	}
}

func (f *simFile) Name() string { return f.name }

// check returns the error for a call on a closed or wrongly opened file.
// Called with disk.mu held.
func (f *simFile) check(write bool) error {
	switch {
	case f.closed:
		return os.ErrClosed
	case write && !f.writable, !write && !f.readable:
		return syscall.EBADF
	}
	return nil
}

func (f *simFile) Read(p []byte) (int, error) {
	f.disk.mu.Lock()
	pos := f.pos
	f.disk.mu.Unlock()
	n, err := f.readAt("read", p, pos)
	f.disk.mu.Lock()
	f.pos += int64(n)
	f.disk.mu.Unlock()
	return n, err
}

func (f *simFile) ReadAt(p []byte, off int64) (int, error) {
	return f.readAt("read", p, off)
}

func (f *simFile) readAt(opName string, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathError(opName, f.name, syscall.EINVAL)
	}
	if err := f.disk.enter(Call{Op: OpRead, Path: f.path, Off: off, Len: len(p)}); err != nil {
		return 0, pathError(opName, f.name, err)
	}
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if err := f.check(false); err != nil {
		return 0, pathError(opName, f.name, err)
	}
	if off >= int64(len(f.node.cache)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.cache[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *simFile) Write(p []byte) (int, error) {
	f.disk.mu.Lock()
	pos := f.pos
	f.disk.mu.Unlock()
	n, err := f.writeAt("write", p, pos)
	f.disk.mu.Lock()
	f.pos += int64(n)
	f.disk.mu.Unlock()
	return n, err
}

func (f *simFile) WriteAt(p []byte, off int64) (int, error) {
	return f.writeAt("write", p, off)
}

func (f *simFile) writeAt(opName string, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathError(opName, f.name, syscall.EINVAL)
	}
	short, err := f.disk.enterWrite(Call{Op: OpWrite, Path: f.path, Off: off, Len: len(p)})
	if err != nil && short <= 0 {
		return 0, pathError(opName, f.name, err)
	}
	d := f.disk
	d.mu.Lock()
	defer d.mu.Unlock()
	if cerr := f.check(true); cerr != nil {
		return 0, pathError(opName, f.name, cerr)
	}
	if err != nil {
		// A short write: part of the buffer reached the file, then the
		// call failed.
		short = min(short, len(p))
		if grow := off + int64(short) - f.node.space(); !d.fitsLocked(grow, 0) {
			return 0, pathError(opName, f.name, syscall.ENOSPC)
		}
		f.node.write(off, p[:short], d.now())
		if err == errShortWrite {
			err = io.ErrShortWrite
		} else {
			err = pathError(opName, f.name, err)
		}
		return short, err
	}
	if grow := off + int64(len(p)) - f.node.space(); !d.fitsLocked(grow, 0) {
		return 0, pathError(opName, f.name, syscall.ENOSPC)
	}
	f.node.write(off, p, d.now())
	return len(p), nil
}

func (f *simFile) Truncate(size int64) error {
	if size < 0 {
		return pathError("truncate", f.name, syscall.EINVAL)
	}
	if err := f.disk.enter(Call{Op: OpTruncate, Path: f.path, Off: size}); err != nil {
		return pathError("truncate", f.name, err)
	}
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if err := f.check(true); err != nil {
		return pathError("truncate", f.name, err)
	}
	if !f.disk.fitsLocked(size-f.node.space(), 0) {
		return pathError("truncate", f.name, syscall.ENOSPC)
	}
	f.node.truncate(size, f.disk.now())
	return nil
}

// Sync is fdatasync. An injected failure behaves as Linux does: the error
// is returned once, and the dirty pages are marked clean without reaching
// the media, so a later crash loses them while reads still see them. A lie
// returns success and persists nothing.
func (f *simFile) Sync() error {
	err := f.disk.enter(Call{Op: OpSync, Path: f.path})
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if f.closed {
		return pathError("fdatasync", f.name, os.ErrClosed)
	}
	switch {
	case err == errLie:
		return nil
	case err != nil:
		f.node.pending = nil
		return pathError("fdatasync", f.name, err)
	}
	f.node.durable = f.node.applied()
	f.node.pending = nil
	return nil
}

func (f *simFile) Stat() (vfs.FileInfo, error) {
	if err := f.disk.enter(Call{Op: OpStat, Path: f.path}); err != nil {
		return vfs.FileInfo{}, pathError("stat", f.name, err)
	}
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if f.closed {
		return vfs.FileInfo{}, pathError("stat", f.name, os.ErrClosed)
	}
	return f.node.info(baseName(f.path)), nil
}

// Allocate reserves the blocks past the file's end: they change no
// content or size, but count as used (as statfs counts them) until a
// truncate gives them back; past the disk's capacity it fails with
// ENOSPC, reserving nothing. It can be failed like any call.
func (f *simFile) Allocate(off, n int64) error {
	if err := f.disk.enter(Call{Op: OpAllocate, Path: f.path, Off: off, Len: int(n)}); err != nil {
		return pathError("fallocate", f.name, err)
	}
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if err := f.check(true); err != nil {
		return pathError("fallocate", f.name, err)
	}
	if grow := off + n - f.node.space(); grow > 0 {
		if !f.disk.fitsLocked(grow, 0) {
			return pathError("fallocate", f.name, syscall.ENOSPC)
		}
		f.node.reserved = off + n
	}
	return nil
}

// SetModTime sets the file's modification time, at once and durably (a
// journaled file system keeps inode times with the metadata it commits).
func (f *simFile) SetModTime(t time.Time) error {
	if err := f.disk.enter(Call{Op: OpSetTime, Path: f.path}); err != nil {
		return pathError("futimes", f.name, err)
	}
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if f.closed {
		return pathError("futimes", f.name, os.ErrClosed)
	}
	f.node.mtime = t
	return nil
}

// DropCache evicts the clean pages: what reads see becomes the media's
// content with the still-dirty changes on top, so bytes a failed sync
// marked clean are gone from the cache too.
func (f *simFile) DropCache() error {
	if err := f.disk.enter(Call{Op: OpDropCache, Path: f.path}); err != nil {
		return pathError("fadvise", f.name, err)
	}
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if f.closed {
		return pathError("fadvise", f.name, os.ErrClosed)
	}
	f.node.cache = f.node.applied()
	return nil
}

func (f *simFile) Close() error {
	if err := f.disk.enter(Call{Op: OpClose, Path: f.path}); err != nil {
		// The descriptor is released even when close reports an error.
		f.disk.mu.Lock()
		if !f.closed {
			f.closed = true
			f.disk.openFiles--
			f.release()
		}
		f.disk.mu.Unlock()
		return pathError("close", f.name, err)
	}
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	if f.closed {
		return pathError("close", f.name, os.ErrClosed)
	}
	f.closed = true
	f.disk.openFiles--
	f.release()
	return nil
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// write changes the cached content and records the change as pending.
func (n *node) write(off int64, p []byte, now time.Time) {
	if len(p) == 0 {
		return
	}
	n.cache = writeInto(n.cache, off, p)
	n.pending = append(n.pending, dataOp{off: off, data: append([]byte(nil), p...)})
	n.mtime = now
}

// truncate changes the cached size and records the change as pending.
func (n *node) truncate(size int64, now time.Time) {
	n.cache = resize(n.cache, size)
	n.reserved = 0 // a truncate, to any size, gives the reserved blocks back
	n.pending = append(n.pending, dataOp{truncate: true, off: size})
	n.mtime = now
}

// applied is the media's content with every pending change on top: what a
// crash that keeps all unsynced changes leaves.
func (n *node) applied() []byte {
	out := append([]byte(nil), n.durable...)
	for _, op := range n.pending {
		if op.truncate {
			out = resize(out, op.off)
		} else {
			out = writeInto(out, op.off, op.data)
		}
	}
	return out
}

func writeInto(b []byte, off int64, p []byte) []byte {
	if end := off + int64(len(p)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[off:], p)
	return b
}

// resize cuts or zero-extends b to size.
func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size:size]
	}
	out := make([]byte, size)
	copy(out, b)
	return out
}
