package partition

import (
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
	"go.uber.org/zap"
)

// The time index of a sealed segment (docs/design.md, "Seek by time") is
// a sparse list of (offset, byte, commit time) for frames about
// timeIndexSpacing bytes apart, in a file beside the segment
// (wire.TimeIndex). The actor collects it while it writes the active
// segment (recovery collects it from its walk) and writes the file when it
// seals the segment. A segment without a file that fits (sealed by a
// build that wrote none, moved by an install, or its file damaged or lost
// in a crash: the file is never fsynced) gets one built by a walk of its
// frames the first time a seek needs it, which the actor then writes.
//
// The index is a hint, never the truth: a seek checks the records on
// either side of the range the index names and, when they disagree,
// searches the whole segment. So an index that lies costs reads, never a
// wrong answer, and damage found after the index was written is stepped
// over as it is without one.

// timeIndexSpacing is the time index's grain for segments of at most
// segmentMaxBytes: about 1,024 entries for a full segment, an entry at
// least every readWindow bytes (one read past an entry reaches the next).
func timeIndexSpacing(segmentMaxBytes int64) int64 {
	return min(readWindow, max(segmentMaxBytes/1024, wire.FrameHeaderSize))
}

// timeIndexFileLimit bounds the time index file of a segment of size
// bytes: every entry at least a frame header apart, so a damaged file
// cannot make a reader allocate more than the index could ever need.
func timeIndexFileLimit(size int64) int64 {
	entries := min(size/wire.FrameHeaderSize+1, wire.MaxTimeIndexEntries)
	return int64(wire.MaxTimeIndexFileSize) - (wire.MaxTimeIndexEntries-entries)*24
}

// timeEntries is a time index being collected, in frame order: by the
// actor as it writes the active segment, by recovery's walk of it, by a
// seek's walk of a sealed segment without a file that fits.
type timeEntries []wire.TimeIndexEntry

// due reports whether a frame starting at pos is due an entry: the first,
// or one at least spacing bytes past the last.
func (t timeEntries) due(pos, spacing int64) bool {
	return len(t) == 0 || pos-t[len(t)-1].Pos >= spacing
}

// note adds the frame of base starting at pos, whose first record was
// committed at firstTime, when it is due an entry.
func (t *timeEntries) note(base, pos, firstTime, spacing int64) {
	if t.due(pos, spacing) {
		*t = append(*t, wire.TimeIndexEntry{Offset: base, Pos: pos, TimeMs: firstTime})
	}
}

// noteFrame adds a CRC-checked frame read from a file when it is due an
// entry, decoding its first record's time only then; a frame that does not
// decode, or whose time is below the last entry's, is left out.
func (t *timeEntries) noteFrame(dicts *codec.DictionarySet, pos int64, h wire.FrameHeader, frame []byte, spacing int64) {
	if !t.due(pos, spacing) {
		return
	}
	if ms, ok := firstRecordTime(dicts, h, frame); ok && (len(*t) == 0 || ms >= (*t)[len(*t)-1].TimeMs) {
		*t = append(*t, wire.TimeIndexEntry{Offset: h.BaseOffset, Pos: pos, TimeMs: ms})
	}
}

// forgetFrom drops the entries at or past byte pos (a failed commit's
// truncate).
func (t *timeEntries) forgetFrom(pos int64) {
	i, _ := slices.BinarySearchFunc(*t, pos, func(e wire.TimeIndexEntry, pos int64) int {
		return cmp.Compare(e.Pos, pos)
	})
	*t = (*t)[:i]
}

// firstRecordTime is the commit time of a CRC-checked frame's first
// record; ok is false when its payload does not decode.
func firstRecordTime(dicts *codec.DictionarySet, h wire.FrameHeader, frame []byte) (t int64, ok bool) {
	payload := h.Stored(frame) // uncompressed: read in place
	if h.Codec != uint8(codec.None) {
		c, err := codec.ForFrame(codec.ID(h.Codec), dicts)
		if err != nil {
			return 0, false
		}
		if payload, err = c.Decode(nil, payload, int(h.UncompressedSize)); err != nil {
			return 0, false
		}
	}
	var rr wire.RecordReader
	if rr.Reset(payload, int(h.RecordCount)) != nil {
		return 0, false
	}
	rec, ok := rr.Next()
	if !ok {
		return 0, false
	}
	e, err := wire.ParseEnvelope(rec)
	if err != nil {
		return 0, false
	}
	return e.CommittedAtUnixMs, true
}

// timeIndexPath is the time index file of the segment at base in dir.
func timeIndexPath(dir string, base int64) string {
	name, _ := wire.TimeIndexFileName(base) // base is a segment's: never negative
	return filepath.Join(dir, name)
}

// writeTimeIndex writes the time index file of a sealed segment: a
// temporary file renamed over the name, neither fsynced, since a reader
// checks the file against the segment and rebuilds one that does not
// fit. A failure costs a later rebuild, never the roll: it is logged and
// counted. The actor calls it, so it never races the unlink of the
// segment (retention detaches on the actor first).
func (s *state) writeTimeIndex(seg *segment, entries []wire.TimeIndexEntry) {
	b, err := wire.EncodeTimeIndex(wire.TimeIndex{SegmentBase: seg.base, SegmentSize: seg.sealedSize, Entries: entries})
	if err == nil {
		err = writeFileNoSync(s.log.opts.FS, timeIndexPath(s.log.dir, seg.base), b)
	}
	if err != nil {
		s.log.metrics.countError(kindTimeIndex)
		s.log.logger.Warn("time index not written; a seek rebuilds it", zap.String("segment", seg.path), zap.Error(err))
	}
}

// writeFileNoSync replaces name with data through a temporary file and a
// rename, so a reader never sees half of it; nothing is made durable.
func writeFileNoSync(files vfs.FS, name string, data []byte) error {
	tmp := name + vfs.TempSuffix
	f, err := files.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		files.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		files.Remove(tmp)
		return err
	}
	if err := files.Rename(tmp, name); err != nil {
		files.Remove(tmp)
		return err
	}
	return nil
}

// removeTimeIndex unlinks a segment's time index file and whatever
// temporary a crash left of it; retention calls it before it unlinks the
// segment, so no index outlives its segment.
func removeTimeIndex(files vfs.FS, dir string, base int64) error {
	path := timeIndexPath(dir, base)
	for _, name := range []string{path + vfs.TempSuffix, path} {
		if err := files.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

type timeIndexMsg struct {
	request
	seg     *segment
	entries []wire.TimeIndexEntry
}

// handleTimeIndex writes the time index a seek built for a sealed segment,
// unless retention has detached the segment since.
func (s *state) handleTimeIndex(m *timeIndexMsg) {
	if slices.Contains(s.sealed, m.seg) {
		s.writeTimeIndex(m.seg, m.entries)
	}
	m.reply <- nil
}

// timeIndexOf returns the time index of a sealed segment whose handle the
// caller holds (f), as loadTimeIndex does, and asks the actor to write it
// out when it had to be built, without waiting: the write is best effort,
// and a seek never queues behind a commit for it.
func (l *Log) timeIndexOf(seg *segment, f vfs.File) ([]wire.TimeIndexEntry, error) {
	entries, built, err := l.loadTimeIndex(seg, f)
	if built {
		select {
		case l.mailbox <- &timeIndexMsg{request: newRequest(), seg: seg, entries: entries}:
		default:
		}
	}
	return entries, err
}

// loadTimeIndex returns the time index of a sealed segment whose handle
// the caller holds (f): the one cached with the handle, else the file's
// when it fits the segment, else, when the file is missing or does not
// fit, one built by walking the segment (built is then true: the file
// should be written). Another failure to read the file is an error: a
// passing I/O error never costs a walk. A walk's entries, checked frame by
// frame, seed the segment's sparse index; a file's never do (seedIfFrame
// checks the ones a caller uses).
func (l *Log) loadTimeIndex(seg *segment, f vfs.File) (entries []wire.TimeIndexEntry, built bool, err error) {
	if entries, ok := seg.file.cachedTimes(); ok {
		return entries, false, nil
	}
	entries, err = l.readTimeIndex(seg)
	if errors.Is(err, errTimeIndexUnfit) {
		if entries, err = l.buildTimeIndex(seg, f); err != nil {
			return nil, false, err
		}
		built = true
		l.logger.Info("time index rebuilt from the segment's frames", zap.String("segment", seg.path), zap.Int("entries", len(entries)))
		for _, e := range entries {
			seg.file.addIndex(e.Offset, e.Pos)
		}
	}
	if err != nil {
		return nil, false, err
	}
	seg.file.cacheTimes(entries)
	return entries, built, nil
}

// errTimeIndexUnfit: the time index file is missing, damaged, or describes
// another segment: rebuild it.
var errTimeIndexUnfit = errors.New("time index missing or unfit")

// readTimeIndex reads the segment's time index file.
func (l *Log) readTimeIndex(seg *segment) ([]wire.TimeIndexEntry, error) {
	b, err := vfs.ReadFile(l.opts.FS, timeIndexPath(l.dir, seg.base), timeIndexFileLimit(seg.sealedSize))
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, vfs.ErrFileTooLarge):
		return nil, fmt.Errorf("%w: %w", errTimeIndexUnfit, err)
	case err != nil:
		return nil, fmt.Errorf("read the time index of %s: %w", seg.path, err)
	}
	x, err := wire.DecodeTimeIndex(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errTimeIndexUnfit, err)
	}
	if x.SegmentBase != seg.base || x.SegmentSize != seg.sealedSize {
		return nil, fmt.Errorf("%w: time index of segment %d, %d bytes, beside segment %d, %d bytes", errTimeIndexUnfit, x.SegmentBase, x.SegmentSize, seg.base, seg.sealedSize)
	}
	return x.Entries, nil
}

// seedIfFrame reports whether a valid frame with base e.Offset starts at
// byte e.Pos of the sealed segment (whose handle the caller holds): an
// entry of a time index file checked before it is used. A frame that
// checks out seeds the sparse index and is cached, so the read that
// follows costs nothing more.
func (l *Log) seedIfFrame(seg *segment, f vfs.File, e wire.TimeIndexEntry) bool {
	if e.Pos < 0 || e.Pos >= seg.sealedSize {
		return false
	}
	sc := &scanner{file: f, limit: seg.sealedSize, buf: make([]byte, min(readWindow, seg.sealedSize-e.Pos))}
	h, frame, status, _ := sc.frameAt(e.Pos)
	if status != frameValid || h.BaseOffset != e.Offset {
		return false
	}
	seg.file.addIndex(e.Offset, e.Pos)
	if decoded, err := decodeFrame(l.opts.Dictionaries, h, frame); err == nil {
		l.cache.remember(seg, h.BaseOffset, h.EndOffset(), e.Pos, h.FrameLen())
		l.cache.put(decoded)
	}
	return true
}

// buildTimeIndex walks a sealed segment's frames, CRC checked, and
// indexes them as the actor does while writing. Damage is stepped over:
// only frames that check out are indexed.
func (l *Log) buildTimeIndex(seg *segment, f vfs.File) ([]wire.TimeIndexEntry, error) {
	spacing := timeIndexSpacing(l.opts.SegmentMaxBytes)
	var times timeEntries
	_, err := WalkSegment(f, seg.sealedSize, seg.base, func(pos int64, h wire.FrameHeader, frame []byte) {
		times.noteFrame(l.opts.Dictionaries, pos, h, frame, spacing)
	}, func(SegmentDamage) {})
	if err != nil {
		return nil, fmt.Errorf("build the time index of %s: %w", seg.path, err)
	}
	return times, nil
}
