package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// recovered is what opening a log found on disk.
type recovered struct {
	sealed    []*segment
	active    *segment
	file      vfs.File // the active segment, open read-write
	tail      int64    // offset after the last valid frame of the active segment
	hwm       int64    // the boundary: the tail, after an fsync unless the hwm file vouched for it
	hwmFile   hwmFileState
	tornTails int
	// lastTime is the commit time of the active segment's last record,
	// when it has one (lastTimeKnown): the floor later commit times are
	// raised to.
	lastTime      int64
	lastTimeKnown bool
}

// walkResult is one walk of the active segment.
type walkResult struct {
	tailPos int64 // byte after the last valid frame
	tail    int64 // offset after the last valid frame
	tornAt  int64 // where a torn tail starts; -1 if none
	// unwrittenAt is where zeros the log allocated ahead of its frames
	// start (they run to the end of the file); -1 if none.
	unwrittenAt int64
	gaps        []gap
	index       []indexEntry
	times       []wire.TimeIndexEntry
	lastPos     int64 // where the last valid frame starts; -1 if none
	lastLen     int64
	// lastTime is the last valid frame's last commit time (lastTimeKnown
	// when its payload decodes), when the walk read it (lastTimeRead): the
	// frame ended the file.
	lastTime      int64
	lastTimeKnown bool
	lastTimeRead  bool
}

// recoverLog opens the segments of dir (docs/design.md, "Recovery";
// partition/doc.go has the argument).
func recoverLog(dir string, opts Options) (*recovered, error) {
	files := opts.FS
	entries, err := files.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// Only a missing directory is created (MkdirAllDurable leaves an
		// existing one as it is), so the listing comes first: an open of
		// an existing log costs no stat for it.
		if err := vfs.MkdirAllDurable(files, dir); err != nil {
			return nil, fmt.Errorf("open %s: %w", dir, err)
		}
		entries, err = files.ReadDir(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: list: %w", dir, err)
	}
	var bases []int64
	for _, e := range entries {
		if base, err := wire.ParseSegmentFileName(e.Name); err == nil && !e.IsDir {
			bases = append(bases, base)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })

	rec := &recovered{}
	if len(bases) == 0 {
		// A new log. The directory's own entry is made durable here too,
		// before anything depends on it (docs/design.md R7), even when an
		// earlier process created it and crashed before its sync.
		if err := files.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("open %s: sync parent directory: %w", dir, err)
		}
		if err := createSegment(files, dir, 0); err != nil {
			return nil, err
		}
		bases = []int64{0}
	}
	for _, base := range bases[:len(bases)-1] {
		seg, err := statSealed(files, dir, base)
		if err != nil {
			return nil, err
		}
		rec.sealed = append(rec.sealed, seg)
	}
	if err := rec.openActive(dir, bases[len(bases)-1], opts); err != nil {
		return nil, err
	}
	return rec, nil
}

// statSealed makes the segment of a sealed file from its name and a stat:
// a sealed segment is never opened at recovery (docs/design.md,
// "Sealed segments do not pin a file descriptor").
func statSealed(files vfs.FS, dir string, base int64) (*segment, error) {
	name, _ := wire.SegmentFileName(base)
	path := filepath.Join(dir, name)
	fi, err := files.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: stat sealed segment: %w", path, err)
	}
	return &segment{base: base, path: path, sealedSize: fi.Size, size: fi.Size,
		firstWrite: fi.ModTime, lastWrite: fi.ModTime, file: newSegFile(files, path)}, nil
}

// createSegment creates an empty segment file named for base and makes its
// entry durable.
func createSegment(files vfs.FS, dir string, base int64) error {
	name, err := wire.SegmentFileName(base)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	f, err := files.OpenFile(path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return fmt.Errorf("create segment %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create segment %s: close: %w", path, err)
	}
	if err := files.SyncDir(dir); err != nil {
		return fmt.Errorf("create segment %s: sync directory: %w", path, err)
	}
	return nil
}

// openActive walks the active segment and settles the boundary.
//
// The hwm file vouches for the boundary only when it holds exactly the
// offset the walk ends at: a clean close leaves no hidden tail, so any other
// value, an empty file or a damaged one means a crash (or damage) came in
// between, and the boundary is taken from the CRC-verified tail after an
// fsync. That path also drops the segment's cached pages and walks again,
// so it sees what the media holds, not what a failed fsync left clean in
// the page cache (docs/design.md R1, R3, row 12).
func (rec *recovered) openActive(dir string, base int64, opts Options) error {
	files := opts.FS
	name, _ := wire.SegmentFileName(base)
	path := filepath.Join(dir, name)
	f, err := files.OpenFile(path, os.O_RDWR)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	// The segment's age is its last write's, taken before recovery writes
	// anything (every truncate below keeps it, too).
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open %s: stat: %w", path, err)
	}
	rec.hwmFile, err = readHWMFile(files, filepath.Join(dir, wire.HWMFileName), opts.Logger)
	if err != nil {
		return err
	}
	spacing := timeIndexSpacing(opts.SegmentMaxBytes)
	// Nothing writes the file between this stat and the walk below (the
	// directory's lock keeps other processes out, and recovery's truncates
	// come after it), so its size is the one the walk covers.
	w, err := walkActive(f, fi.Size, base, spacing, opts.Dictionaries)
	if err != nil {
		return err
	}
	if !rec.hwmFile.present || rec.hwmFile.value != w.tail || w.tornAt >= 0 {
		if rec.hwmFile.present {
			opts.Logger.Warn("hwm file does not match the record tail; taking the boundary from the tail",
				zap.String("segment", path), zap.Int64("hwm_file", rec.hwmFile.value), zap.Int64("tail", w.tail))
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("open %s: fsync before taking the boundary from the tail: %w", path, err)
		}
		if err := f.DropCache(); err != nil {
			return fmt.Errorf("open %s: drop cached pages: %w", path, err)
		}
		// The cache dropped, the file is what the media holds, whose size
		// may differ from the one read before (a failed fdatasync's pages
		// are gone): stat it again.
		now, err := f.Stat()
		if err != nil {
			return fmt.Errorf("open %s: stat: %w", path, err)
		}
		if w, err = walkActive(f, now.Size, base, spacing, opts.Dictionaries); err != nil {
			return err
		}
		if w.tornAt < 0 && w.unwrittenAt < 0 {
			// A clean tail after a crash: give back blocks reserved past it
			// (prealloc.go); the size stays, so nothing needs an fsync, and
			// a failure costs only the blocks.
			if err := truncateKeepingTime(f, w.tailPos); err != nil {
				opts.Logger.Warn("giving back reserved blocks failed", zap.String("segment", path), zap.Error(err))
			}
		}
		if w.tornAt >= 0 {
			if err := truncateKeepingTime(f, w.tornAt); err != nil {
				return fmt.Errorf("open %s: truncate torn tail at byte %d: %w", path, w.tornAt, err)
			}
			if err := f.Sync(); err != nil {
				return fmt.Errorf("open %s: fsync torn-tail truncate: %w", path, err)
			}
			rec.tornTails++
			opts.Logger.Warn("truncated a torn tail", zap.String("segment", path),
				zap.Int64("byte", w.tornAt), zap.Int64("tail_offset", w.tail))
		}
	}
	if w.unwrittenAt >= 0 {
		// Space allocated ahead and never written (a crash, or a close that
		// could not trim it): cut, so the actor's view of the file is exact
		// and a roll never seals zeros.
		if err := truncateKeepingTime(f, w.unwrittenAt); err != nil {
			return fmt.Errorf("open %s: trim unwritten space at byte %d: %w", path, w.unwrittenAt, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("open %s: fsync the trim of unwritten space: %w", path, err)
		}
		opts.Logger.Info("trimmed space allocated ahead of the frames", zap.String("segment", path), zap.Int64("byte", w.unwrittenAt))
	}
	for _, g := range w.gaps {
		opts.Logger.Error("damaged frame under valid later frames: offsets recorded as a permanent gap",
			zap.String("segment", path), zap.Int64("from", g.from), zap.Int64("to", g.to))
	}
	seg := &segment{base: base, path: path, gaps: w.gaps, size: w.tailPos,
		firstWrite: fi.ModTime, lastWrite: fi.ModTime, file: newSegFile(files, path)}
	seg.file.adopt(f)
	seg.file.index = w.index // not yet shared with anyone
	seg.times = w.times
	rec.active, rec.file, rec.tail, rec.hwm = seg, f, w.tail, w.tail
	if rec.lastTime, rec.lastTimeKnown, err = lastRecordTime(f, w, opts.Dictionaries); err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	ok = true
	return nil
}

// walkActive walks the active segment's size bytes (WalkSegment) and
// collects what recovery needs: the tail, the index, the time index, the
// gaps, where a torn tail starts and where the last valid frame is, and
// that frame's last commit time when the frame ends the file (the usual
// case: no torn tail, no space allocated ahead), while its bytes are in
// hand.
func walkActive(f vfs.File, size, base, timeSpacing int64, dicts *codec.DictionarySet) (walkResult, error) {
	w := walkResult{lastPos: -1}
	var times timeEntries
	lastIndexed := int64(-indexSpacing)
	res, err := WalkSegment(f, size, base, func(pos int64, h wire.FrameHeader, frame []byte) {
		if pos-lastIndexed >= indexSpacing {
			w.index = append(w.index, indexEntry{offset: h.BaseOffset, pos: pos})
			lastIndexed = pos
		}
		times.noteFrame(dicts, pos, h, frame, timeSpacing)
		w.lastPos, w.lastLen = pos, h.FrameLen()
		if pos+h.FrameLen() == size { // no frame can follow it
			w.lastTime, w.lastTimeKnown = frameLastTime(h, frame, dicts)
			w.lastTimeRead = true
		}
	}, func(d SegmentDamage) {
		if !d.TornTail() {
			w.gaps = append(w.gaps, gap{from: d.Expect, to: d.ResumeBase})
			lastIndexed = d.ResumeAt - indexSpacing // index the frame after the damage
		}
	})
	if err != nil {
		return w, fmt.Errorf("open %s: %w", f.Name(), err)
	}
	w.tail, w.tailPos, w.tornAt, w.unwrittenAt = res.Tail, res.TailPos, res.TornAt, res.UnwrittenAt
	w.times = times
	return w, nil
}

// lastRecordTime reads the commit time of the last record of the walk's
// last valid frame; known is false when the segment has none, or the
// frame no longer checks out (it is then a damaged frame for readers).
func lastRecordTime(f vfs.File, w walkResult, dicts *codec.DictionarySet) (t int64, known bool, err error) {
	if w.lastPos < 0 {
		return 0, false, nil
	}
	if w.lastTimeRead {
		return w.lastTime, w.lastTimeKnown, nil
	}
	buf := make([]byte, w.lastLen)
	if _, err := f.ReadAt(buf, w.lastPos); err != nil {
		return 0, false, fmt.Errorf("read the last frame at byte %d: %w", w.lastPos, err)
	}
	h, err := wire.CheckFrame(buf)
	if err != nil {
		return 0, false, nil
	}
	t, known = frameLastTime(h, buf, dicts)
	return t, known, nil
}

// frameLastTime is the commit time of a CRC-checked frame's last record;
// known is false when its payload does not decode.
func frameLastTime(h wire.FrameHeader, frame []byte, dicts *codec.DictionarySet) (t int64, known bool) {
	var arena []byte
	payload, err := framePayload(dicts, h, frame, &arena)
	if err != nil {
		return 0, false
	}
	records, err := frameEnvelopes(h, payload, nil)
	if err != nil || len(records) == 0 {
		return 0, false
	}
	return records[len(records)-1].CommittedAtUnixMs, true
}
