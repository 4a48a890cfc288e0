package diskcheck

// The probe's files: where they are, how a live probe's are told from a
// crash's leftovers, and their removal.
//
// What keeps a live probe's files from another probe's cleanup:
//   - a probe holds its file's lock (vfs.FS.Lock) from before it creates
//     its entry until after it has removed both names;
//   - Lock creates the file, then locks it: in between, another probe's
//     cleanup may take it for a leftover. So a probe uses its file only
//     once it has made sure, lock held, that the name is still that file
//     (createOwn); else it tries a new name;
//   - a cleanup removes a file and its entry only while it holds the
//     file's lock itself: a live probe's lock refuses it, and a probe that
//     has not locked its file yet finds the name gone (or another file's)
//     and tries another.
// So an entry whose file is missing is no live probe's: its probe
// crashed, or ended, after removing its file.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
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
	id          string
	file, entry string
}

func newProbeNames(dir string) (probeNames, error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return probeNames{}, fmt.Errorf("a probe file's name: %w", err)
	}
	hexID := hex.EncodeToString(id[:])
	file := filepath.Join(dir, wire.DiskCheckProbePrefix+hexID)
	return probeNames{id: hexID, file: file, entry: file + wire.DiskCheckEntrySuffix}, nil
}

// ownFileAttempts bounds the names a probe tries when other probes'
// cleanups keep taking its file between its create and its lock.
const ownFileAttempts = 4

// createOwn creates the probe's file under a new name and locks it, and
// makes sure, the lock held, that the name is still the file it locked:
// it writes its id into the file and reads the name back. A name that is
// gone, or another file's, was taken by a cleanup between the create and
// the lock (or a lock the cleanup holds refused it); it closes that file
// and tries a new name. The names are left to the cleanup that took them.
func createOwn(fsys vfs.FS, dir string) (probeNames, vfs.File, error) {
	var taken error
	for range ownFileAttempts {
		names, err := newProbeNames(dir)
		if err != nil {
			return probeNames{}, nil, err
		}
		f, err := fsys.Lock(names.file)
		if errors.Is(err, vfs.ErrLocked) {
			taken = err
			continue
		}
		if err != nil {
			return names, nil, err
		}
		own, err := stillOwn(fsys, names, f)
		if err != nil {
			f.Close()
			return names, nil, err
		}
		if own {
			return names, f, nil
		}
		taken = fmt.Errorf("%s was removed by another probe's cleanup before it was locked", names.file)
		if err := f.Close(); err != nil {
			return names, nil, err
		}
	}
	return probeNames{}, nil, fmt.Errorf("another probe's cleanup took the probe file %d times in a row: %w", ownFileAttempts, taken)
}

// stillOwn writes the probe's id at the start of f and says whether the
// file at the probe's name holds it: whether the name is still f.
func stillOwn(fsys vfs.FS, names probeNames, f vfs.File) (bool, error) {
	if _, err := f.WriteAt([]byte(names.id), 0); err != nil {
		return false, err
	}
	g, err := fsys.OpenFile(names.file, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer g.Close()
	got := make([]byte, len(names.id))
	if _, err := g.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return bytes.Equal(got, []byte(names.id)), nil
}

// removeLeftovers removes the probe files in dir that no live probe
// holds: what a probe a crash ended left. It takes each file's lock
// before it removes the file and its entry (an entry alone, its file
// gone, has its file's name locked all the same: Lock creates it, and
// it goes with the entry); a lock held is a live probe's, whose files it
// leaves be. Only regular files with the probe's prefix are touched:
// nothing else in a data directory bears it. It counts the files it
// removed of those it listed.
func removeLeftovers(fsys vfs.FS, dir string) (removed int, err error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list %s for a crashed probe's files: %w", dir, err)
	}
	listed, seen := map[string]bool{}, map[string]bool{}
	var files []string // the probes' file names, each once, in order
	for _, e := range entries {
		if e.IsDir || !strings.HasPrefix(e.Name, wire.DiskCheckProbePrefix) {
			continue
		}
		name := filepath.Join(dir, e.Name)
		listed[name] = true
		if file := strings.TrimSuffix(name, wire.DiskCheckEntrySuffix); !seen[file] {
			seen[file] = true
			files = append(files, file)
		}
	}
	sort.Strings(files)
	var errs []error
	for _, file := range files {
		n, err := removeUnheld(fsys, file, listed)
		removed += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	if removed > 0 {
		if err := fsys.SyncDir(dir); err != nil {
			errs = append(errs, fmt.Errorf("sync %s: %w", dir, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("remove a crashed probe's files: %w", err)
	}
	return removed, nil
}

// removeUnheld removes a probe's entry and file under the file's lock,
// unless a live probe holds it; it counts the names of listed it removed.
func removeUnheld(fsys vfs.FS, file string, listed map[string]bool) (removed int, err error) {
	f, err := fsys.Lock(file)
	if errors.Is(err, vfs.ErrLocked) {
		return 0, nil // a running probe's
	}
	if err != nil {
		return 0, fmt.Errorf("lock %s: %w", file, err)
	}
	var errs []error
	for _, name := range []string{file + wire.DiskCheckEntrySuffix, file} {
		err := fsys.Remove(name)
		switch {
		case err == nil && listed[name]:
			removed++
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		}
	}
	if err := f.Close(); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// removeOwn removes a probe's files, then closes the file, so its lock
// covers its names until they are gone, and syncs the directory, so that
// only a crash leaves them. f is nil when the create failed, which may
// still have left the file (a lock refused after the open created it);
// names is zero when no name was had. A name already gone is no error.
func removeOwn(fsys vfs.FS, dir string, names probeNames, f vfs.File) error {
	var errs []error
	if names.file != "" {
		for _, name := range []string{names.entry, names.file} {
			if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if f != nil {
		if err := f.Close(); err != nil {
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
