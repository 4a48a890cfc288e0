package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
)

// A time index file sits beside a sealed segment and lists, for a sparse
// choice of its frames, where the frame starts and the commit time of its
// first record. It is derived data: a reader checks it against the
// segment it describes and rebuilds it from the frames when it does not
// fit, so it is written without fsync. Part of the on-disk format:
//
//	offset  size  field
//	0       4     magic "NTIX"
//	4       1     version, 1
//	5       3     zero
//	8       8     the segment's base offset
//	16      8     the segment's size in bytes
//	24      4     entry count n
//	28      24n   entries: base offset, byte position, commit time (ms)
//	28+24n  4     crc32c over every byte before it
//
// All integers are big-endian. Entries are strictly increasing in offset
// and position, start at or after the segment's base, lie inside its
// size, and their times never decrease.
const (
	// TimeIndexFileSuffix ends a time index file's name, which is otherwise
	// its segment's.
	TimeIndexFileSuffix = ".timeindex"
	// TimeIndexVersion is the format version this package writes.
	TimeIndexVersion = 1
	// MaxTimeIndexEntries bounds a time index, so a damaged count cannot
	// make a reader allocate without bound: one entry per 4 KiB of a 4 GiB
	// segment.
	MaxTimeIndexEntries = 1 << 20

	timeIndexMagic      = "NTIX"
	timeIndexHeaderSize = 28
	timeIndexEntrySize  = 24
	timeIndexCRCSize    = 4
)

// MaxTimeIndexFileSize is the size of the largest time index file.
const MaxTimeIndexFileSize = timeIndexHeaderSize + MaxTimeIndexEntries*timeIndexEntrySize + timeIndexCRCSize

// TimeIndexEntry says the frame whose first record has Offset starts at
// byte Pos of its segment, and that record was committed at TimeMs.
type TimeIndexEntry struct {
	Offset int64
	Pos    int64
	TimeMs int64
}

// TimeIndex is a decoded time index file.
type TimeIndex struct {
	SegmentBase int64
	SegmentSize int64
	Entries     []TimeIndexEntry
}

// TimeIndexFileName is the time index file of the segment whose first
// record has offset firstOffset.
func TimeIndexFileName(firstOffset int64) (string, error) {
	name, err := SegmentFileName(firstOffset)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(name, SegmentFileSuffix) + TimeIndexFileSuffix, nil
}

// TimeIndexFileSize is the size of a time index file of entries entries.
func TimeIndexFileSize(entries int) int {
	return timeIndexHeaderSize + entries*timeIndexEntrySize + timeIndexCRCSize
}

// EncodeTimeIndex is the content of a time index file. An index that
// breaks the format's rules is ErrInvalidInput.
func EncodeTimeIndex(x TimeIndex) ([]byte, error) {
	if err := x.check(); err != nil {
		return nil, fmt.Errorf("%w: time index: %s", ErrInvalidInput, err)
	}
	b := make([]byte, timeIndexHeaderSize, timeIndexHeaderSize+len(x.Entries)*timeIndexEntrySize+timeIndexCRCSize)
	copy(b, timeIndexMagic)
	b[4] = TimeIndexVersion
	binary.BigEndian.PutUint64(b[8:], uint64(x.SegmentBase))
	binary.BigEndian.PutUint64(b[16:], uint64(x.SegmentSize))
	binary.BigEndian.PutUint32(b[24:], uint32(len(x.Entries)))
	for _, e := range x.Entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.Offset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Pos))
		b = binary.BigEndian.AppendUint64(b, uint64(e.TimeMs))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// DecodeTimeIndex reads a time index file. Anything but a file
// EncodeTimeIndex could have written is ErrCorrupt, found before anything
// is allocated for its entries.
func DecodeTimeIndex(b []byte) (TimeIndex, error) {
	if len(b) < timeIndexHeaderSize+timeIndexCRCSize {
		return TimeIndex{}, fmt.Errorf("%w: time index: %d bytes, shorter than a header", ErrCorrupt, len(b))
	}
	if string(b[:4]) != timeIndexMagic || b[4] != TimeIndexVersion || b[5]|b[6]|b[7] != 0 {
		return TimeIndex{}, fmt.Errorf("%w: time index: bad magic or version % x", ErrCorrupt, b[:8])
	}
	n := binary.BigEndian.Uint32(b[24:])
	if n > MaxTimeIndexEntries || len(b) != timeIndexHeaderSize+int(n)*timeIndexEntrySize+timeIndexCRCSize {
		return TimeIndex{}, fmt.Errorf("%w: time index: %d bytes for %d entries", ErrCorrupt, len(b), n)
	}
	body := b[:len(b)-timeIndexCRCSize]
	if sum, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(b[len(body):]); sum != want {
		return TimeIndex{}, fmt.Errorf("%w: time index: crc32c 0x%08x, file says 0x%08x", ErrCorrupt, sum, want)
	}
	x := TimeIndex{
		SegmentBase: int64(binary.BigEndian.Uint64(b[8:])),
		SegmentSize: int64(binary.BigEndian.Uint64(b[16:])),
		Entries:     make([]TimeIndexEntry, n),
	}
	for i := range x.Entries {
		e := b[timeIndexHeaderSize+i*timeIndexEntrySize:]
		x.Entries[i] = TimeIndexEntry{
			Offset: int64(binary.BigEndian.Uint64(e)),
			Pos:    int64(binary.BigEndian.Uint64(e[8:])),
			TimeMs: int64(binary.BigEndian.Uint64(e[16:])),
		}
	}
	if err := x.check(); err != nil {
		return TimeIndex{}, fmt.Errorf("%w: time index: %s", ErrCorrupt, err)
	}
	return x, nil
}

// check says which of the format's rules x breaks, if any.
func (x TimeIndex) check() error {
	switch {
	case x.SegmentBase < 0 || x.SegmentSize < 0:
		return fmt.Errorf("segment base %d, size %d", x.SegmentBase, x.SegmentSize)
	case len(x.Entries) > MaxTimeIndexEntries:
		return fmt.Errorf("%d entries, over %d", len(x.Entries), MaxTimeIndexEntries)
	}
	prev := TimeIndexEntry{Offset: x.SegmentBase - 1, Pos: -1}
	for i, e := range x.Entries {
		if e.Offset <= prev.Offset || e.Pos <= prev.Pos || e.Pos >= x.SegmentSize || (i > 0 && e.TimeMs < prev.TimeMs) {
			return fmt.Errorf("entry %d (offset %d, byte %d, time %d) out of order or outside the segment", i, e.Offset, e.Pos, e.TimeMs)
		}
		prev = e
	}
	return nil
}
