package diskcheck

// The call under way, for a caller that stops waiting for a probe.

import (
	"sync"
	"time"

	"github.com/narad-io/storage/vfs"
)

// Watch says which file system call a running probe is in, on what, and
// since when. A flush cannot be interrupted, and one on a failing device
// may never return: a caller that must go on (a node's start) runs the
// probe in a goroutine, stops waiting after a bound, and names the call
// that holds it.
//
// Invariants, under mu: call is "" when no call is under way; else it
// names the one under way, path what it is on, and since is when it
// began on the probe's clock.
type Watch struct {
	mu    sync.Mutex
	call  string
	path  string
	since time.Time
}

// Current is the call under way ("fdatasync", "directory fsync",
// "write", ...), the path it is on and when it began; ok is false when
// the probe is in none.
func (w *Watch) Current() (call, path string, since time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.call, w.path, w.since, w.call != ""
}

func (w *Watch) enter(call, path string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.call, w.path, w.since = call, path, now
}

func (w *Watch) leave() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.call, w.path = "", ""
}

// watched runs one call under the watch.
func watched[T any](w *Watch, now func() time.Time, call, path string, do func() (T, error)) (T, error) {
	w.enter(call, path, now())
	defer w.leave()
	return do()
}

// watchedFS is an FS whose every call the probe makes is under a Watch,
// as are the calls on the files it opens.
type watchedFS struct {
	vfs.FS
	w   *Watch
	now func() time.Time
}

func (f watchedFS) Stat(name string) (vfs.FileInfo, error) {
	return watched(f.w, f.now, "stat", name, func() (vfs.FileInfo, error) { return f.FS.Stat(name) })
}

func (f watchedFS) Free(name string) (vfs.Space, error) {
	return watched(f.w, f.now, "statfs", name, func() (vfs.Space, error) { return f.FS.Free(name) })
}

func (f watchedFS) ReadDir(name string) ([]vfs.DirEntry, error) {
	return watched(f.w, f.now, "listing", name, func() ([]vfs.DirEntry, error) { return f.FS.ReadDir(name) })
}

func (f watchedFS) OpenFile(name string, flag int) (vfs.File, error) {
	g, err := watched(f.w, f.now, "open", name, func() (vfs.File, error) { return f.FS.OpenFile(name, flag) })
	if err != nil {
		return nil, err
	}
	return watchedFile{File: g, fs: f}, nil
}

func (f watchedFS) Lock(name string) (vfs.File, error) {
	g, err := watched(f.w, f.now, "lock", name, func() (vfs.File, error) { return f.FS.Lock(name) })
	if err != nil {
		return nil, err
	}
	return watchedFile{File: g, fs: f}, nil
}

func (f watchedFS) Remove(name string) error {
	_, err := watched(f.w, f.now, "remove", name, func() (struct{}, error) { return struct{}{}, f.FS.Remove(name) })
	return err
}

func (f watchedFS) SyncDir(name string) error {
	_, err := watched(f.w, f.now, "directory fsync", name, func() (struct{}, error) { return struct{}{}, f.FS.SyncDir(name) })
	return err
}

// describe is DescribeFS under the watch.
func (f watchedFS) describe(d vfs.FSDescriber, name string) (vfs.FSInfo, error) {
	return watched(f.w, f.now, "statfs", name, func() (vfs.FSInfo, error) { return d.DescribeFS(name) })
}

// watchedFile is a probe's open file, its calls under the watch.
type watchedFile struct {
	vfs.File
	fs watchedFS
}

func (g watchedFile) do(call string, do func() error) error {
	_, err := watched(g.fs.w, g.fs.now, call, g.Name(), func() (struct{}, error) { return struct{}{}, do() })
	return err
}

func (g watchedFile) WriteAt(b []byte, off int64) (n int, err error) {
	err = g.do("write", func() error { n, err = g.File.WriteAt(b, off); return err })
	return n, err
}

func (g watchedFile) ReadAt(b []byte, off int64) (n int, err error) {
	err = g.do("read", func() error { n, err = g.File.ReadAt(b, off); return err })
	return n, err
}

func (g watchedFile) Sync() error { return g.do("fdatasync", g.File.Sync) }

func (g watchedFile) Allocate(off, n int64) error {
	return g.do("fallocate", func() error { return g.File.Allocate(off, n) })
}

func (g watchedFile) Truncate(size int64) error {
	return g.do("truncate", func() error { return g.File.Truncate(size) })
}

func (g watchedFile) Close() error { return g.do("close", g.File.Close) }
