package runtime

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// diskBoundary is what a closed partition's directory says of its
// boundary, read without opening its log (startup's check, doc.go):
// the listing, the hwm file and a stat of the newest segment, never a
// segment's bytes.
type diskBoundary struct {
	hwm     int64          // the boundary, when exact
	exact   bool           // an open would take hwm as it is: nothing to recover
	entries []vfs.DirEntry // the directory's listing (its cursor files)
}

// readBoundary reads dir's boundary. The hwm file (partition/hwmfile.go)
// is in one of these states:
//
//   - missing or empty: the log's first advance emptied it (and synced
//     the truncate) and no close wrote it since, so a crash or a failed
//     close came in between; or no close ever wrote it;
//   - 8 bytes: the value a close wrote and fdatasynced, after cutting the
//     segment back to it; or, after a crash inside that write, whatever
//     reached the media (zeros, garbage, or the right value);
//   - anything else: damage.
//
// The open trusts the file only when it equals the tail its walk of the
// active segment finds; it cannot be told from here whether it does, but
// it can be told when it cannot: a value is exact only if it is at least
// the newest segment's base, and equal to it exactly when that segment
// is empty (a clean close leaves the active segment holding exactly the
// records below the boundary), and no more above it than that segment's
// bytes can hold (maxRecordsIn). So the zeros a torn write leaves over a
// partition with records never pass, and its garbage only below that
// bound. With no value, the boundary is on
// disk only when no segment holds a byte: the newest segment's base (or
// 0 with no segment, or no directory), as peekLocked answers. Anything
// else is not exact: the open recovers it. Only an I/O error is an error.
func readBoundary(files vfs.FS, dir string) (diskBoundary, error) {
	entries, err := files.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return diskBoundary{exact: true}, nil // nothing on disk: an open starts an empty log at 0
	}
	if err != nil {
		return diskBoundary{}, err
	}
	b := diskBoundary{entries: entries}
	var bases []int64
	for _, e := range entries {
		if base, err := wire.ParseSegmentFileName(e.Name); err == nil && !e.IsDir {
			bases = append(bases, base)
		}
	}
	value, present, err := readHWMValue(files, dir)
	if err != nil {
		return diskBoundary{}, err
	}
	if len(bases) == 0 {
		// An open makes segment 0 and walks it: the tail is 0.
		b.exact = !present || value == 0
		return b, nil
	}
	newest := bases[0]
	for _, base := range bases {
		newest = max(newest, base)
	}
	newestSize, err := segmentSize(files, dir, newest)
	if err != nil {
		return diskBoundary{}, err
	}
	if present {
		b.hwm, b.exact = value, value >= newest && (newestSize == 0) == (value == newest) &&
			value-newest <= maxRecordsIn(newestSize)
		return b, nil
	}
	for _, base := range bases {
		size := newestSize
		if base != newest {
			if size, err = segmentSize(files, dir, base); err != nil {
				return diskBoundary{}, err
			}
		}
		if size > 0 {
			return b, nil // records, and no boundary on disk: a crash
		}
	}
	b.hwm, b.exact = newest, true
	return b, nil
}

// maxRecordsIn bounds the records size bytes of frames can hold: a frame
// takes at least a header and a byte, and holds at most a record for
// every RecordLenSize bytes of its payload, itself at most MaxFrameBytes
// before its codec. A value above the newest segment's base by more
// cannot be its tail: random bytes a torn sector left in the hwm file
// (found by review). The bound is loose (a codec can pack many small
// records into few bytes), so it never takes an exact value for one that
// is not; such garbage below it still passes.
func maxRecordsIn(size int64) int64 {
	const perFrame = wire.MaxFrameBytes / wire.RecordLenSize
	frames := size / (wire.FrameHeaderSize + 1)
	if frames > math.MaxInt64/perFrame {
		return math.MaxInt64
	}
	return frames * perFrame
}

// readHWMValue reads dir's hwm file as the open does (readHWMFile): a
// missing, empty or damaged file holds no value. One read of a few
// bytes past the file's size tells a damaged long file too, without a
// stat: the pass makes it for every partition.
func readHWMValue(files vfs.FS, dir string) (value int64, present bool, err error) {
	f, err := files.OpenFile(filepath.Join(dir, wire.HWMFileName), os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	var buf [wire.OffsetFileSize + 1]byte
	n, err := f.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, false, err
	}
	value, present, err = wire.DecodeOffsetFile(buf[:n])
	if err != nil {
		return 0, false, nil // damaged: a length other than 0 or 8, or negative
	}
	return value, present, nil
}

// segmentSize stats the segment of dir named for base.
func segmentSize(files vfs.FS, dir string, base int64) (int64, error) {
	name, err := wire.SegmentFileName(base)
	if err != nil {
		return 0, err
	}
	fi, err := files.Stat(filepath.Join(dir, name))
	if err != nil {
		return 0, fmt.Errorf("stat segment %s: %w", name, err)
	}
	return fi.Size, nil
}
