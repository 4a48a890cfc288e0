package vfs

import (
	"errors"
	"io"
	"os"
	"time"
)

// Modes the engine creates everything with (docs/design.md, "On disk"):
// private to the broker's user. They are applied at creation only; an
// existing file or directory keeps the mode it has.
const (
	FileMode os.FileMode = 0o600
	DirMode  os.FileMode = 0o700
)

// FS is the one seam for every file operation of the project. Paths are
// slash-separated operating-system paths.
//
// Nothing here syncs a directory on its own: a caller whose create, rename or
// remove must survive a crash calls SyncDir on the parent, and the simulated
// disk's crash images prove that it did.
type FS interface {
	// OpenFile opens name with the os.O_* flags given (O_RDONLY, O_WRONLY,
	// O_RDWR, O_CREATE, O_EXCL, O_TRUNC). A file it creates gets FileMode
	// exactly, whatever the umask.
	OpenFile(name string, flag int) (File, error)
	// Mkdir creates one directory with DirMode exactly.
	Mkdir(name string) error
	// MkdirAll creates name and any missing parents, each with DirMode
	// exactly. It does not sync the parents.
	MkdirAll(name string) error
	// Remove unlinks a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything below it; a missing name is not
	// an error.
	RemoveAll(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]DirEntry, error)
	// Stat describes name, following symbolic links.
	Stat(name string) (FileInfo, error)
	// SyncDir fsyncs a directory, making the creates, renames and removes
	// of entries in it durable.
	SyncDir(name string) error
	// Lock opens name read-write (creating it with FileMode) and takes an
	// exclusive advisory lock on the whole file without waiting. A lock
	// that another holder has, in this process or another, fails with
	// ErrLocked. The lock is held until the returned File is closed or the
	// process ends; the File can be written (a holder writes its pid, so a
	// refused caller can name it).
	Lock(name string) (File, error)
	// LockHeld reports whether a holder has name's lock, without taking it
	// (so a read-only caller never makes a starting holder fail).
	LockHeld(name string) (bool, error)
	// Free reports the space left to an unprivileged writer on the file
	// system holding name.
	Free(name string) (Space, error)
}

// Space is what a file system has left.
type Space struct {
	Bytes  uint64 // bytes an unprivileged writer may still write
	Inodes uint64 // files and directories it may still create
}

// ErrLocked is Lock's error for a file another holder has locked.
var ErrLocked = errors.New("locked by another holder")

// File is an open file. Reads and writes without an offset use the file's
// own position; ReadAt and WriteAt do not move it.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Name is the path the file was opened with.
	Name() string
	// Sync is fdatasync: the file's data and size are durable when it
	// returns nil. After an error the written data is of unknown state (a
	// failed fdatasync on Linux marks the dirty pages clean): the caller
	// must treat the file as crashed (docs/design.md, "Fsync failure").
	Sync() error
	// Truncate changes the file's size; it is durable after Sync.
	Truncate(size int64) error
	Stat() (FileInfo, error)
	// DropCache evicts the file's clean cached pages
	// (posix_fadvise(POSIX_FADV_DONTNEED)), so the next read comes from the
	// media. A reopen after a failed fdatasync uses it to scan what the
	// disk holds rather than what the page cache remembers (docs/design.md R3).
	DropCache() error
	// Allocate reserves the disk blocks of [off, off+n) without changing
	// the file's size or what reads return (fallocate with
	// FALLOC_FL_KEEP_SIZE), so later writes there need no allocation; a
	// Truncate (to any size, the current one included) gives back what
	// lies past the size. Reserving is an optimization: after an error
	// (ENOSPC, or a file system that cannot) the file's size and content
	// are as they were, though some blocks may stay reserved (ext4 keeps
	// what it got before ENOSPC): a Truncate gives them back.
	Allocate(off, n int64) error
	// SetModTime sets the file's modification time (futimens). Retention
	// takes a recovered segment's age from it, so a truncate that only
	// trims space the log prepared puts back the time it found.
	SetModTime(t time.Time) error
}

// FileInfo is what Stat reports.
type FileInfo struct {
	Name    string // base name
	Size    int64
	Mode    os.FileMode // permission bits and os.ModeDir
	ModTime time.Time
}

// IsDir reports whether the entry is a directory.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }

// DirEntry is one name in a directory listing.
type DirEntry struct {
	Name  string
	IsDir bool
}
