package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// ErrLocked: another process (or another node of this one) holds the
// data directory's lock.
var ErrLocked = errors.New("datadir: data directory in use")

// Lock is the exclusive lock on a data directory: while one is held, no
// other holder can take it, so two nodes never write one directory (two
// daemons on one data dir would each ack records the other overwrites,
// and each stamp its own incarnation over the other's).
//
// It is an exclusive lock on <data dir>/LOCK (vfs.FS.Lock: an
// open-file-description lock, as flock is, so it is released when the
// holder closes it or its process ends and a crash never leaves a stale
// lock, and it can be queried without being taken); the file holds the
// holder's pid, so a refused caller can name it.
//
// Invariants: file is open, and the lock held, from Acquire until
// Release; dir is the directory it locks.
type Lock struct {
	dir  string
	file vfs.File
}

// Acquire takes the data directory's lock, creating the directory
// (durably) if it is missing. Nothing else in the directory is read or
// written before it. A held lock is ErrLocked, naming the holder's pid.
func Acquire(files vfs.FS, dir string) (*Lock, error) {
	if files == nil {
		files = vfs.OS{}
	}
	if err := vfs.MkdirAllDurable(files, dir); err != nil {
		return nil, fmt.Errorf("datadir: data directory: %w", err)
	}
	name := filepath.Join(dir, wire.LockFileName)
	f, err := files.Lock(name)
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s is locked by %s", ErrLocked, dir, holderOf(files, name))
	}
	if err != nil {
		return nil, fmt.Errorf("datadir: lock data directory %s: %w", dir, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("datadir: lock data directory %s: %w", dir, err)
	}
	if _, err := f.WriteAt(pid, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("datadir: lock data directory %s: %w", dir, err)
	}
	return &Lock{dir: dir, file: f}, nil
}

// Dir is the locked data directory.
func (l *Lock) Dir() string { return l.dir }

// Release gives the lock up. The pid stays in the file: it names the last
// holder, and only the lock itself says whether one holds it now.
func (l *Lock) Release() error { return l.file.Close() }

// InUse reports whether a live process holds the data directory's lock,
// and names it, without writing anything: the read-only offline
// tools (package tool: verify, inspect) use it to warn that a torn tail may be a
// write in flight. A directory that never had a lock file is not in use.
func InUse(files vfs.FS, dir string) (holder string, inUse bool, err error) {
	if files == nil {
		files = vfs.OS{}
	}
	name := filepath.Join(dir, wire.LockFileName)
	held, err := files.LockHeld(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil || !held {
		return "", false, err
	}
	return holderOf(files, name), true, nil
}

// holderOf names the process a lock file says holds it.
func holderOf(files vfs.FS, name string) string {
	b, err := vfs.ReadFile(files, name, 64)
	pid := strings.TrimSpace(string(b))
	if _, perr := strconv.Atoi(pid); err != nil || perr != nil {
		return "another process (its pid is not readable)"
	}
	return "process " + pid
}
