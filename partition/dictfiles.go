package partition

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// A topic's zstd dictionaries live beside its partitions' directories, one
// file each (wire.DictionaryFileName), written once and never changed: the
// runtime stores them, every log of the topic decodes with them, and the
// tools read them the same way (docs/design.md, "Dictionaries").

// DictionaryFileInfo describes one dictionary file that checked out.
type DictionaryFileInfo struct {
	ID          uint32
	Bytes       int
	TrainedAtMs int64
}

// DictionaryFileError is one dictionary file left out of a load, and why.
type DictionaryFileError struct {
	Name string
	Err  error
}

func (e DictionaryFileError) Error() string { return e.Name + ": " + e.Err.Error() }
func (e DictionaryFileError) Unwrap() error { return e.Err }

// ReadDictionaryFiles reads every dictionary file of a topic directory into
// a set whose current dictionary is the newest trained (ties: the higher
// id, so every reader of the same files picks the same one). A file that
// does not check out (its CRC, its name against its id, the dictionary
// itself) is left out and returned in bad: frames naming it read as
// damage, the others are served. A missing directory holds none. A failure
// to list the directory or to read a file (the disk's error, not the
// file's: isDictionaryDamage) is err, with an empty set: never taken for
// a lost dictionary, whose frames readers would step over for good.
func ReadDictionaryFiles(files vfs.FS, topicDir string) (set *codec.DictionarySet, infos []DictionaryFileInfo, bad []DictionaryFileError, err error) {
	set = &codec.DictionarySet{}
	entries, err := files.ReadDir(topicDir)
	if errors.Is(err, fs.ErrNotExist) {
		return set, nil, nil, nil
	}
	if err != nil {
		return set, nil, nil, fmt.Errorf("list the dictionaries of %s: %w", topicDir, err)
	}
	for _, e := range entries {
		id, err := wire.ParseDictionaryFileName(e.Name)
		if err != nil || e.IsDir {
			continue
		}
		info, d, err := readDictionaryFile(files, filepath.Join(topicDir, e.Name), id)
		if err == nil {
			err = set.Add(d)
		}
		if err != nil && !isDictionaryDamage(err) {
			return &codec.DictionarySet{}, nil, nil, fmt.Errorf("read dictionary file %s of %s: %w", e.Name, topicDir, err)
		}
		if err != nil {
			bad = append(bad, DictionaryFileError{Name: e.Name, Err: err})
			continue
		}
		infos = append(infos, info)
	}
	if len(infos) > 0 {
		slices.SortFunc(infos, func(a, b DictionaryFileInfo) int {
			return cmp.Or(cmp.Compare(b.TrainedAtMs, a.TrainedAtMs), cmp.Compare(b.ID, a.ID))
		})
		set.SetCurrent(infos[0].ID) // in the set: added above
	}
	return set, infos, bad, nil
}

// readDictionaryFile reads and checks one dictionary file whose name says id.
func readDictionaryFile(files vfs.FS, path string, id uint32) (DictionaryFileInfo, *codec.Dictionary, error) {
	b, err := vfs.ReadFile(files, path, wire.DictionaryFileHeaderSize+wire.MaxDictionaryFileBytes)
	if err != nil {
		return DictionaryFileInfo{}, nil, err
	}
	f, err := wire.DecodeDictionaryFile(b)
	if err != nil {
		return DictionaryFileInfo{}, nil, err
	}
	d, err := codec.ParseDictionary(f.Dictionary)
	if err != nil {
		return DictionaryFileInfo{}, nil, err
	}
	if f.ID != id || d.ID() != id {
		return DictionaryFileInfo{}, nil, fmt.Errorf("%w: dictionary file named for id %d holds id %d (dictionary %d)", wire.ErrCorrupt, id, f.ID, d.ID())
	}
	return DictionaryFileInfo{ID: id, Bytes: len(f.Dictionary), TrainedAtMs: f.TrainedAtMs}, d, nil
}

// StoreDictionaryFile writes d into the topic directory durably (a
// temporary file, fdatasync, rename, directory fsync): after it returns
// the file survives a power loss, and a crash before leaves no file or the
// whole one. A file already there with the same dictionary is kept, and
// synced with its directory entry before the store returns; one
// with other bytes under the id is codec.ErrDictionaryConflict, a damaged
// one an error: neither is ever overwritten, frames may name it.
func StoreDictionaryFile(files vfs.FS, topicDir string, d *codec.Dictionary, trainedAtMs int64) error {
	name, err := wire.DictionaryFileName(d.ID())
	if err != nil {
		return err
	}
	path := filepath.Join(topicDir, name)
	if exists, err := vfs.Exists(files, path); err != nil {
		return err
	} else if exists {
		_, have, err := readDictionaryFile(files, path, d.ID())
		if err != nil && isDictionaryDamage(err) {
			return fmt.Errorf("%w: dictionary %d: %w", ErrDictionaryFileDamaged, d.ID(), err)
		}
		if err != nil {
			return fmt.Errorf("dictionary %d: read the file there: %w", d.ID(), err)
		}
		if !bytes.Equal(have.Bytes(), d.Bytes()) {
			return fmt.Errorf("%w: dictionary %d", codec.ErrDictionaryConflict, d.ID())
		}
		// An earlier store may have failed after its rename (its
		// directory sync): the file is here but maybe not durable. Make
		// it so before returning, since frames will name it.
		return syncExisting(files, path)
	}
	b, err := wire.EncodeDictionaryFile(wire.DictionaryFile{ID: d.ID(), TrainedAtMs: trainedAtMs, Dictionary: d.Bytes()})
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(files, path, b)
}

// ErrDictionaryFileDamaged: StoreDictionaryFile found a file under the
// id that does not check out, and left it.
var ErrDictionaryFileDamaged = errors.New("partition: the dictionary file there does not check out")

// isDictionaryDamage tells a dictionary file whose bytes do not check out
// (left out: its frames are damage) from a failure to read it (the disk's,
// tried again at the next load).
func isDictionaryDamage(err error) bool {
	return errors.Is(err, wire.ErrCorrupt) || errors.Is(err, wire.ErrTruncated) ||
		errors.Is(err, codec.ErrBadDictionary) || errors.Is(err, codec.ErrDictionaryConflict) ||
		errors.Is(err, vfs.ErrFileTooLarge)
}

// syncExisting makes a file found in place durable: its content
// (fdatasync) and its directory entry (the directory's fsync).
func syncExisting(files vfs.FS, path string) error {
	f, err := files.OpenFile(path, os.O_RDONLY)
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := files.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("sync the entry of %s: %w", path, err)
	}
	return nil
}
