package diskcheck

// The probe's files: where they are, how a live probe's are told from a
// crash's leftovers, and their removal.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// probeNames are one probe's two files in the directory it probes: the
// file it writes and syncs, locked while the probe runs, and the entry it
// creates and removes to time the directory's fsync. Both begin with
// wire.DiskCheckProbePrefix and a random id, so two probes of one
// directory (a node starting while an operator runs the command) never
// share a file.
type probeNames struct {
	file, entry string
}

func newProbeNames(dir string) (probeNames, error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return probeNames{}, fmt.Errorf("a probe file's name: %w", err)
	}
	file := filepath.Join(dir, wire.DiskCheckProbePrefix+hex.EncodeToString(id[:]))
	return probeNames{file: file, entry: file + wire.DiskCheckEntrySuffix}, nil
}

// removeLeftovers removes the probe files in dir that no live probe
// holds: what a probe a crash ended left. A probe's file is locked while
// it runs (vfs.FS.Lock), so one whose lock is held belongs to a probe
// still running, and it and its entry are left to it. Only regular files
// with the probe's prefix are touched: nothing else in a data directory
// bears it.
func removeLeftovers(fsys vfs.FS, dir string) (removed int, err error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list %s for a crashed probe's files: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir || !strings.HasPrefix(e.Name, wire.DiskCheckProbePrefix) {
			continue
		}
		name := filepath.Join(dir, e.Name)
		held, err := fsys.LockHeld(strings.TrimSuffix(name, wire.DiskCheckEntrySuffix))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("a probe file's lock: %w", err)
		}
		if held {
			continue // a running probe's
		}
		if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("remove a crashed probe's file: %w", err)
		}
		removed++
	}
	if removed > 0 {
		if err := fsys.SyncDir(dir); err != nil {
			return removed, fmt.Errorf("remove a crashed probe's files: sync %s: %w", dir, err)
		}
	}
	return removed, nil
}

// removeOwn closes and removes a probe's files (f is nil when its create
// failed, which may still have left the file) and syncs the directory,
// so that only a crash leaves them. A name already gone is no error.
func removeOwn(fsys vfs.FS, dir string, names probeNames, f vfs.File) error {
	var errs []error
	if f != nil {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range []string{names.entry, names.file} {
		if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove the probe's files: %w", err)
	}
	return nil
}
