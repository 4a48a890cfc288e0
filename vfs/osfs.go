package vfs

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// OS is the real file system: package os for the calls it does well, and
// golang.org/x/sys/unix for opens (blocking descriptors, kept out of Go's
// network poller), fdatasync, directory fsync and fadvise.
type OS struct{}

var _ FS = OS{}

// OpenFile implements FS. A create is tried exclusively first, so that the
// mode is forced (past the umask) only on a file this call created: an
// existing file keeps the mode it was created with.
func (OS) OpenFile(name string, flag int) (File, error) {
	if flag&os.O_CREATE == 0 {
		return openBlocking(name, flag, 0)
	}
	f, err := openBlocking(name, flag|os.O_EXCL, FileMode)
	if err == nil {
		if err := f.f.Chmod(FileMode); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	if flag&os.O_EXCL != 0 || !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return openBlocking(name, flag&^os.O_CREATE, 0)
}

// openBlocking opens name as os.OpenFile would (close-on-exec, errors an
// *fs.PathError of op "open"), but leaves the descriptor out of Go's
// network poller: os.OpenFile puts every descriptor it opens in
// non-blocking mode and offers it to epoll, which refuses regular files
// and directories, and puts it back, five system calls an open for
// nothing (a log's open past the open-log budget opens four files). The
// engine sets no deadline on a file, the only thing the poller would give
// it; os.NewFile of a blocking descriptor registers nothing.
func openBlocking(name string, flag int, perm os.FileMode) (*osFile, error) {
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &osFile{os.NewFile(uintptr(fd), name)}, nil
}

// Mkdir implements FS.
func (OS) Mkdir(name string) error {
	if err := os.Mkdir(name, DirMode); err != nil {
		return err
	}
	return os.Chmod(name, DirMode)
}

// MkdirAll implements FS. Unlike os.MkdirAll it forces DirMode on every
// directory it creates, and only on those.
func (o OS) MkdirAll(name string) error {
	fi, err := os.Stat(name)
	if err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: name, Err: unix.ENOTDIR}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(name); parent != name {
		if err := o.MkdirAll(parent); err != nil {
			return err
		}
	}
	err = o.Mkdir(name)
	if errors.Is(err, fs.ErrExist) {
		return nil // made by someone else meanwhile
	}
	return err
}

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// RemoveAll implements FS.
func (OS) RemoveAll(name string) error { return os.RemoveAll(name) }

// Rename implements FS.
func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// ReadDir implements FS.
func (OS) ReadDir(name string) ([]DirEntry, error) {
	entries, err := os.ReadDir(name) // sorted by name
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, len(entries))
	for i, e := range entries {
		out[i] = DirEntry{Name: e.Name(), IsDir: e.IsDir()}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Stat implements FS.
func (OS) Stat(name string) (FileInfo, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return FileInfo{}, err
	}
	return fileInfoOf(fi), nil
}

// SyncDir implements FS.
func (OS) SyncDir(name string) error {
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return &fs.PathError{Op: "open", Path: name, Err: err}
	}
	err = unix.Fsync(fd)
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		return &fs.PathError{Op: "close", Path: name, Err: cerr}
	}
	if err != nil {
		return &fs.PathError{Op: "fsync", Path: name, Err: err}
	}
	return nil
}

// Free implements FS with statfs: the blocks available to unprivileged
// users (not the root-reserved ones) and the free inodes; a file system
// with no inode table (statfs reports none) has inodes without end.
func (OS) Free(name string) (Space, error) {
	var st unix.Statfs_t
	if err := retryEINTR(func() error { return unix.Statfs(name, &st) }); err != nil {
		return Space{}, &fs.PathError{Op: "statfs", Path: name, Err: err}
	}
	unit := uint64(st.Frsize) // statfs counts blocks in fragments, as df does
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	inodes := st.Ffree
	if st.Files == 0 {
		inodes = math.MaxUint64 // no inode table (btrfs, vfat): never short of inodes
	}
	return Space{Bytes: st.Bavail * unit, Inodes: inodes}, nil
}

// Lock implements FS with an open-file-description record lock over the
// whole file (fcntl F_OFD_SETLK, F_WRLCK): like flock it belongs to the
// open file description, so closing the File (or the process ending)
// releases it, and a second description conflicts even in the same
// process; unlike flock it can be queried without being taken (LockHeld).
func (o OS) Lock(name string) (File, error) {
	f, err := o.OpenFile(name, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	lock := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	err = retryEINTR(func() error { return unix.FcntlFlock(f.(*osFile).f.Fd(), unix.F_OFD_SETLK, &lock) })
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, &fs.PathError{Op: "lock", Path: name, Err: ErrLocked}
		}
		return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
	}
	return f, nil
}

// LockHeld implements FS with fcntl F_OFD_GETLK, which asks without
// taking the lock.
func (OS) LockHeld(name string) (bool, error) {
	f, err := openBlocking(name, os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	lock := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := retryEINTR(func() error { return unix.FcntlFlock(f.f.Fd(), unix.F_OFD_GETLK, &lock) }); err != nil {
		return false, &fs.PathError{Op: "lock query", Path: name, Err: err}
	}
	return lock.Type != unix.F_UNLCK, nil
}

func retryEINTR(call func() error) error {
	for {
		if err := call(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func fileInfoOf(fi fs.FileInfo) FileInfo {
	return FileInfo{Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

// osFile is an open *os.File; the Sync it offers is fdatasync.
type osFile struct{ f *os.File }

func (o *osFile) Read(p []byte) (int, error)               { return o.f.Read(p) }
func (o *osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o *osFile) Write(p []byte) (int, error)              { return o.f.Write(p) }
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o *osFile) Close() error                             { return o.f.Close() }
func (o *osFile) Name() string                             { return o.f.Name() }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }

func (o *osFile) Sync() error {
	if err := unix.Fdatasync(int(o.f.Fd())); err != nil {
		return &fs.PathError{Op: "fdatasync", Path: o.f.Name(), Err: err}
	}
	return nil
}

func (o *osFile) Stat() (FileInfo, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return FileInfo{}, err
	}
	return fileInfoOf(fi), nil
}

func (o *osFile) Allocate(off, n int64) error {
	err := retryEINTR(func() error { return unix.Fallocate(int(o.f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n) })
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: o.f.Name(), Err: err}
	}
	return nil
}

func (o *osFile) SetModTime(t time.Time) error {
	tv := unix.NsecToTimeval(t.UnixNano())
	if err := unix.Futimes(int(o.f.Fd()), []unix.Timeval{tv, tv}); err != nil {
		return &os.PathError{Op: "futimes", Path: o.f.Name(), Err: err}
	}
	return nil
}

func (o *osFile) DropCache() error {
	if err := unix.Fadvise(int(o.f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return &fs.PathError{Op: "fadvise", Path: o.f.Name(), Err: err}
	}
	return nil
}
