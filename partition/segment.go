package partition

import (
	"errors"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// indexSpacing is the sparse index's grain: an entry at most every this
// many bytes of a segment, so a lookup scans at most about this much.
const indexSpacing = 4 << 10

// indexEntry says a frame starting at offset begins at byte pos.
type indexEntry struct {
	offset int64
	pos    int64
}

// gap is a damaged range of offsets, [from, to), that recovery found
// under valid later frames. It is permanent: never served, never
// renumbered.
type gap struct {
	from, to int64
}

// segment is one segment file.
//
// Invariants:
//   - base, path and gaps never change once the segment is published in a
//     view; sealedSize is set once, when the segment is sealed, before the
//     view that shows it sealed.
//   - size, firstWrite, lastWrite and full belong to the actor.
//   - file is the only field readers and the actor share; it guards itself.
type segment struct {
	base       int64
	path       string
	gaps       []gap // recorded by recovery, in order
	sealedSize int64 // bytes of a sealed segment
	file       *segFile

	// Actor-owned.
	size       int64       // bytes of written frames
	firstWrite time.Time   // first frame write (or the file's mtime after recovery)
	lastWrite  time.Time   // last frame write (or the file's mtime after recovery)
	full       bool        // a frame pushed it past the cap: roll at the next chance
	times      timeEntries // the active segment's time index (timeindex.go)
}

// gapAt returns the recorded gap holding offset, if any.
func (s *segment) gapAt(offset int64) (gap, bool) {
	for _, g := range s.gaps {
		if offset >= g.from && offset < g.to {
			return g, true
		}
	}
	return gap{}, false
}

// segFile is a segment's file handle and sparse index, shared by the actor
// and readers. A sealed segment's handle is opened lazily by the first read
// and dropped, with the index, when the segment leaves the log's hot set or
// the log; a handle in use is closed only once its last user releases it.
//
// Invariants, under mu:
//   - refs counts acquire calls (and the actor's adopt) not yet released;
//     file is closed only when refs is 0 and the segment is retired or was
//     dropped from the hot set since its last acquire.
//   - index is sorted by offset and by pos; every entry points at a frame
//     start that a CRC-checked write or walk found there.
//   - times is the sealed segment's time index once a seek has loaded it
//     (timesKnown); it goes with the handle.
type segFile struct {
	fs   vfs.FS
	path string

	mu         sync.Mutex
	file       vfs.File
	refs       int
	retired    bool // detached from the log: close at the last release
	dropping   bool // left the hot set while in use: close at the last release
	index      []indexEntry
	times      []wire.TimeIndexEntry
	timesKnown bool
}

func newSegFile(fs vfs.FS, path string) *segFile {
	return &segFile{fs: fs, path: path}
}

var errSegmentRetired = errors.New("segment retired")

// acquire returns the open handle, opening it read-only if needed. Every
// successful acquire is paired with a release.
func (sf *segFile) acquire() (vfs.File, error) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.retired {
		return nil, errSegmentRetired
	}
	if sf.file == nil {
		f, err := sf.fs.OpenFile(sf.path, os.O_RDONLY)
		if err != nil {
			return nil, err
		}
		sf.file = f
	}
	sf.refs++
	return sf.file, nil
}

// adopt installs an already open handle (the actor's handle of the active
// segment) and takes a reference for the adopter.
func (sf *segFile) adopt(f vfs.File) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.file = f
	sf.refs++
}

// keep cancels a pending drop: the segment is back in the hot set.
func (sf *segFile) keep() {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.dropping = false
}

func (sf *segFile) release() {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.refs--
	sf.closeIfIdleLocked()
}

// drop closes the handle and forgets the index once nobody uses them (the
// segment left the hot set): at once if idle, else at the last release.
// The next read reopens and reindexes.
func (sf *segFile) drop() {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.dropping = true
	sf.closeIfIdleLocked()
}

// retire marks the segment gone from the log: no new acquire succeeds, and
// the handle closes at the last release.
func (sf *segFile) retire() {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.retired = true
	sf.closeIfIdleLocked()
}

func (sf *segFile) closeIfIdleLocked() {
	if sf.refs == 0 && (sf.retired || sf.dropping) && sf.file != nil {
		sf.file.Close()
		sf.file = nil
		sf.index = nil
		sf.times, sf.timesKnown = nil, false
		sf.dropping = false
	}
}

// addIndex records a frame start unless an entry lies less than
// indexSpacing before it. Writers add in order; readers that walk a sealed
// segment add behind the entry they started from, so it inserts in order.
func (sf *segFile) addIndex(offset, pos int64) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	i := sort.Search(len(sf.index), func(i int) bool { return sf.index[i].pos >= pos })
	if i > 0 && pos-sf.index[i-1].pos < indexSpacing {
		return
	}
	if i < len(sf.index) && sf.index[i].pos == pos {
		return
	}
	sf.index = append(sf.index, indexEntry{})
	copy(sf.index[i+1:], sf.index[i:])
	sf.index[i] = indexEntry{offset: offset, pos: pos}
}

// truncateIndex forgets every entry at or past pos (a failed commit's
// truncate).
func (sf *segFile) truncateIndex(pos int64) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	i := sort.Search(len(sf.index), func(i int) bool { return sf.index[i].pos >= pos })
	sf.index = sf.index[:i]
}

// lookup returns the last index entry at or below offset, or false.
func (sf *segFile) lookup(offset int64) (indexEntry, bool) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	i := sort.Search(len(sf.index), func(i int) bool { return sf.index[i].offset > offset })
	if i == 0 {
		return indexEntry{}, false
	}
	return sf.index[i-1], true
}

// cachedTimes returns the time index a seek loaded, if any.
func (sf *segFile) cachedTimes() ([]wire.TimeIndexEntry, bool) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return sf.times, sf.timesKnown
}

// cacheTimes keeps a sealed segment's time index with its handle, which
// the caller holds (so it is dropped with the handle).
func (sf *segFile) cacheTimes(entries []wire.TimeIndexEntry) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.times, sf.timesKnown = entries, true
}
