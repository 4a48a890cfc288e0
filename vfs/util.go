package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// TempSuffix ends the name of a file that WriteFileAtomic is still writing.
// A crash can leave one behind; it never holds the truth, and a reader that
// lists a directory skips it.
const TempSuffix = ".tmp"

// WriteFileAtomic replaces name with data so that a crash at any point
// leaves either the old content or the new, never a mix or a short file:
// write a temporary file, fdatasync it, rename it over name, fsync the
// directory (docs/design.md R1 and R7).
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	tmp := name + TempSuffix
	// A temporary file a crash left before its rename is removed, not
	// truncated: reusing its inode, a lost write of the new content would
	// leave its old, complete content in place, a valid older file.
	if err := fsys.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write %s: remove a leftover temporary: %w", name, err)
	}
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("write %s: create temporary: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: write temporary: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: sync temporary: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: close temporary: %w", name, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("write %s: rename: %w", name, err)
	}
	if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", name, err)
	}
	return nil
}

// ErrFileTooLarge is ReadFile's error for a file over its limit.
var ErrFileTooLarge = errors.New("file larger than expected")

// ReadFile reads a whole file of at most limit bytes. A larger file is an
// error before anything is allocated for it, so a damaged or hostile file
// cannot make a reader allocate beyond what it expects.
func ReadFile(fsys FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size > limit {
		return nil, fmt.Errorf("read %s: %w: %d bytes, at most %d", name, ErrFileTooLarge, fi.Size, limit)
	}
	buf := make([]byte, fi.Size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return buf[:n], nil
}

// RemoveDurable unlinks name and fsyncs its directory, so the removal
// survives a crash.
func RemoveDurable(fsys FS, name string) error {
	if err := fsys.Remove(name); err != nil {
		return err
	}
	if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("remove %s: sync directory: %w", name, err)
	}
	return nil
}

// MkdirAllDurable creates name and any missing parents, and fsyncs the
// parent of each directory it created, oldest first, so every created
// entry survives a power loss before anything is put inside it
// (docs/design.md R7). A directory that already exists is left as it is;
// on a failed sync the directories it created are removed again.
func MkdirAllDurable(fsys FS, name string) error {
	var missing []string
	for dir := filepath.Clean(name); ; dir = filepath.Dir(dir) {
		exists, err := Exists(fsys, dir)
		if err != nil {
			return fmt.Errorf("mkdir %s: %w", name, err)
		}
		if exists || filepath.Dir(dir) == dir {
			break
		}
		missing = append(missing, dir)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(name); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(missing[i])); err != nil {
			// Take back what was created, so that a retry creates it
			// again and syncs it: left in place, it would exist, and the
			// retry would never make its entry durable.
			for _, dir := range missing {
				fsys.Remove(dir) // best effort: the sync's error is the one returned
			}
			return fmt.Errorf("mkdir %s: sync %s: %w", name, filepath.Dir(missing[i]), err)
		}
	}
	return nil
}

// Exists reports whether name exists. Any error other than "does not exist"
// is returned, never taken for absence.
func Exists(fsys FS, name string) (bool, error) {
	_, err := fsys.Stat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}
