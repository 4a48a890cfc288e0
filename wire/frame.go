package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// Frame header constants. Part of the on-disk format: changing any of them
// makes existing segments unreadable.
const (
	// FrameMagic opens every frame, big-endian: the bytes 0xCA 0xFE.
	FrameMagic = 0xCAFE
	// FrameHeaderSize is the fixed size of a frame header in bytes.
	FrameHeaderSize = 27
	// MaxFrameBytes bounds a whole frame (header plus stored payload) and,
	// separately, the uncompressed payload. Enforced on write and on read.
	MaxFrameBytes = 256 << 20

	// CodecNone stores the payload as is (flags bits 0-2 = 0).
	CodecNone = 0
	// CodecZstd stores the payload zstd-compressed (flags bits 0-2 = 1).
	CodecZstd = 1
	// CodecZstdDict stores the payload as one zstd frame compressed with a
	// topic's dictionary, which the zstd frame header names by id: inside
	// the payload, under the CRC (flags bits 0-2 = 2).
	CodecZstdDict = 2
	// MaxCodecID is the largest codec id the three flag bits can hold. The
	// frame format accepts ids 3 to 7; the codec package refuses the ones it
	// does not know.
	MaxCodecID = 7
)

// Field positions inside the frame header.
const (
	frameFlagsAt        = 2
	frameCountAt        = 3
	frameBaseAt         = 7
	frameUncompressedAt = 15
	frameStoredAt       = 19
	frameCRCAt          = 23

	codecMask = 0x07 // flags bits 0-2; every other flag bit is never written
)

// castagnoli is the CRC-32C table every checksum of this package uses.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FrameHeader is a decoded frame header.
//
// A FrameHeader returned by ParseFrameHeader or CheckFrame satisfies:
//   - Codec <= MaxCodecID;
//   - RecordCount >= 1 and BaseOffset >= 0, and EndOffset does not overflow;
//   - UncompressedSize <= MaxFrameBytes and FrameLen() <= MaxFrameBytes;
//   - StoredSize >= 1;
//   - RecordCount <= UncompressedSize/4 (every record has a 4-byte length);
//   - with CodecNone, UncompressedSize == StoredSize.
//
// It says nothing about where the frame sits: that the first frame of a
// segment has the segment's name as its BaseOffset, and that every next frame
// starts at the previous frame's EndOffset, is for the caller to check.
type FrameHeader struct {
	Codec            uint8  // flags bits 0-2
	RecordCount      int32  // records in the payload
	BaseOffset       int64  // offset of the first record
	UncompressedSize uint32 // payload bytes before the codec
	StoredSize       uint32 // payload bytes on disk, after the codec
	CRC              uint32 // crc32c over header[2:23] and the stored payload
}

// FrameLen is the frame's size on disk: header plus stored payload.
func (h FrameHeader) FrameLen() int64 { return FrameHeaderSize + int64(h.StoredSize) }

// EndOffset is the offset just past the frame's last record.
func (h FrameHeader) EndOffset() int64 { return h.BaseOffset + int64(h.RecordCount) }

// Stored returns the stored payload of frame, a buffer starting at the frame
// that CheckFrame accepted with header h. The slice points into frame.
func (h FrameHeader) Stored(frame []byte) []byte {
	end := h.FrameLen()
	return frame[FrameHeaderSize:end:end]
}

// headerProblem says what makes h impossible, or "" when the format allows
// it. bound is true when the problem is a size bound being exceeded.
func headerProblem(h FrameHeader) (problem string, bound bool) {
	switch {
	case h.Codec > MaxCodecID:
		return fmt.Sprintf("codec %d does not fit in flags bits 0-2", h.Codec), false
	case h.RecordCount < 1:
		return fmt.Sprintf("record count %d, want at least 1", h.RecordCount), false
	case h.BaseOffset < 0:
		return fmt.Sprintf("negative base offset %d", h.BaseOffset), false
	case h.BaseOffset > math.MaxInt64-int64(h.RecordCount):
		return fmt.Sprintf("base offset %d plus record count %d overflows int64", h.BaseOffset, h.RecordCount), false
	case h.UncompressedSize > MaxFrameBytes:
		return fmt.Sprintf("uncompressed size %d over the %d-byte frame bound", h.UncompressedSize, MaxFrameBytes), true
	case h.FrameLen() > MaxFrameBytes:
		return fmt.Sprintf("frame length %d over the %d-byte frame bound", h.FrameLen(), MaxFrameBytes), true
	case h.StoredSize == 0:
		return "empty stored payload", false
	case int64(h.RecordCount) > int64(h.UncompressedSize)/RecordLenSize:
		return fmt.Sprintf("record count %d does not fit in %d uncompressed bytes (4 per length prefix)", h.RecordCount, h.UncompressedSize), false
	case h.Codec == CodecNone && h.UncompressedSize != h.StoredSize:
		return fmt.Sprintf("codec none with uncompressed size %d != stored size %d", h.UncompressedSize, h.StoredSize), false
	}
	return "", false
}

// ParseFrameHeader decodes and validates the 27-byte header at the start of
// b. It never looks past b[:FrameHeaderSize], so a caller reads the header,
// checks FrameLen against the bytes left in the file, and only then
// allocates or reads the payload.
//
// Errors: ErrTruncated when b is shorter than a header; ErrCorrupt when the
// magic, the flags or any field is impossible (see FrameHeader). The CRC is
// not checked here: CheckFrame does that.
func ParseFrameHeader(b []byte) (FrameHeader, error) {
	if len(b) < FrameHeaderSize {
		return FrameHeader{}, fmt.Errorf("%w: frame header: %d of %d bytes", ErrTruncated, len(b), FrameHeaderSize)
	}
	if magic := binary.BigEndian.Uint16(b); magic != FrameMagic {
		return FrameHeader{}, fmt.Errorf("%w: frame header: magic 0x%04x, want 0x%04x", ErrCorrupt, magic, FrameMagic)
	}
	flags := b[frameFlagsAt]
	if flags&^codecMask != 0 {
		return FrameHeader{}, fmt.Errorf("%w: frame header: flags 0x%02x set bits outside the codec (bits 0-2)", ErrCorrupt, flags)
	}
	h := headerFields(b)
	if !plausible(&h) {
		problem, _ := headerProblem(h)
		return FrameHeader{}, fmt.Errorf("%w: frame header: %s", ErrCorrupt, problem)
	}
	return h, nil
}

// headerFields decodes the fields of the header at the start of b, at
// least FrameHeaderSize bytes, unchecked.
func headerFields(b []byte) FrameHeader {
	_ = b[FrameHeaderSize-1]
	return FrameHeader{
		Codec:            b[frameFlagsAt] & codecMask,
		RecordCount:      int32(binary.BigEndian.Uint32(b[frameCountAt:])),
		BaseOffset:       int64(binary.BigEndian.Uint64(b[frameBaseAt:])),
		UncompressedSize: binary.BigEndian.Uint32(b[frameUncompressedAt:]),
		StoredSize:       binary.BigEndian.Uint32(b[frameStoredAt:]),
		CRC:              binary.BigEndian.Uint32(b[frameCRCAt:]),
	}
}

// WholeFrame is CheckFrame's verdict before the CRC, without its words,
// for a read path's loop over the frames of a window, where building an
// error for the frame a window cuts would cost an allocation a window:
// b's frame header and true when CheckFrame finds nothing wrong but,
// maybe, the CRC (CRCMatches checks it; FuzzCheckFrame holds the pair to
// CheckFrame). A loop that takes only frames of some kind decides on the
// header first and pays for the CRC only of a frame it takes.
func WholeFrame(b []byte) (FrameHeader, bool) {
	if len(b) < FrameHeaderSize || binary.BigEndian.Uint16(b) != FrameMagic || b[frameFlagsAt]&^codecMask != 0 {
		return FrameHeader{}, false
	}
	h := headerFields(b)
	if !plausible(&h) || int64(len(b)) < h.FrameLen() {
		return FrameHeader{}, false
	}
	return h, true
}

// CRCMatches reports whether the frame b holds, whose header WholeFrame
// returned as h, matches its CRC.
func (h FrameHeader) CRCMatches(b []byte) bool {
	return frameCRC(b[:FrameHeaderSize], h.Stored(b)) == h.CRC
}

// plausible is headerProblem's verdict without its words, cheap enough
// for the read path, which parses a header per frame: true exactly when
// headerProblem finds nothing (TestFrameHeader_PlausibleIsHeaderProblemsVerdict).
func plausible(h *FrameHeader) bool {
	return h.Codec <= MaxCodecID &&
		h.RecordCount >= 1 && h.BaseOffset >= 0 && h.BaseOffset <= math.MaxInt64-int64(h.RecordCount) &&
		h.UncompressedSize <= MaxFrameBytes && h.StoredSize >= 1 && h.StoredSize <= MaxFrameBytes-FrameHeaderSize &&
		int64(h.RecordCount) <= int64(h.UncompressedSize)/RecordLenSize &&
		(h.Codec != CodecNone || h.UncompressedSize == h.StoredSize)
}

// CheckFrame decodes the frame at the start of b and verifies its CRC. It
// tells the three cases apart:
//   - ErrTruncated: b ends before the header or before the stored payload
//     the header announces (a short or torn frame);
//   - ErrCorrupt: the header is impossible or the CRC does not match;
//   - nil: a valid frame, b[:h.FrameLen()]; bytes after it are not looked at.
//
// The stored payload is h.Stored(b). Position checks (BaseOffset against the
// segment name or the previous frame's EndOffset) are the caller's.
func CheckFrame(b []byte) (FrameHeader, error) {
	h, err := ParseFrameHeader(b)
	if err != nil {
		return FrameHeader{}, err
	}
	if err := h.Verify(b); err != nil {
		return FrameHeader{}, err
	}
	return h, nil
}

// Verify is CheckFrame for a caller that parsed b's header already (h is
// ParseFrameHeader(b)'s): it checks that b holds the whole frame and that
// the frame matches its CRC, with CheckFrame's errors.
func (h FrameHeader) Verify(b []byte) error {
	if int64(len(b)) < h.FrameLen() {
		return fmt.Errorf("%w: frame at base offset %d: %d of %d bytes", ErrTruncated, h.BaseOffset, len(b), h.FrameLen())
	}
	if sum := frameCRC(b[:FrameHeaderSize], h.Stored(b)); sum != h.CRC {
		return fmt.Errorf("%w: frame at base offset %d: crc32c 0x%08x, header says 0x%08x", ErrCorrupt, h.BaseOffset, sum, h.CRC)
	}
	return nil
}

// FrameSum checksums a frame in parts, in order from its first byte, for
// a reader that checks each part of a large frame as it arrives (while the
// part is still in the CPU's cache) rather than the whole frame after.
// Its Check agrees with CheckFrame's CRC check for any split of a frame.
type FrameSum struct {
	sum uint32
	n   int // bytes of the frame written
}

// Write adds the frame's next bytes.
func (s *FrameSum) Write(part []byte) {
	for len(part) > 0 {
		var take int
		switch {
		case s.n < frameFlagsAt: // the magic: outside the sum
			take = min(len(part), frameFlagsAt-s.n)
		case s.n < frameCRCAt:
			take = min(len(part), frameCRCAt-s.n)
			s.sum = crc32.Update(s.sum, castagnoli, part[:take])
		case s.n < FrameHeaderSize: // the CRC itself
			take = min(len(part), FrameHeaderSize-s.n)
		default:
			take = len(part)
			s.sum = crc32.Update(s.sum, castagnoli, part)
		}
		s.n += take
		part = part[take:]
	}
}

// Check reports whether the bytes written are all of h's frame and match
// its CRC, with CheckFrame's errors.
func (s *FrameSum) Check(h FrameHeader) error {
	if int64(s.n) < h.FrameLen() {
		return fmt.Errorf("%w: frame at base offset %d: %d of %d bytes", ErrTruncated, h.BaseOffset, s.n, h.FrameLen())
	}
	if int64(s.n) > h.FrameLen() || s.sum != h.CRC {
		return fmt.Errorf("%w: frame at base offset %d: crc32c 0x%08x, header says 0x%08x", ErrCorrupt, h.BaseOffset, s.sum, h.CRC)
	}
	return nil
}

// frameCRC is the frame checksum: crc32c over header[2:23] (everything but
// the magic and the CRC itself) followed by the stored payload. Leaving the
// magic out lets a resyncing scanner search for 0xCAFE cheaply.
func frameCRC(header, stored []byte) uint32 {
	sum := crc32.Update(0, castagnoli, header[frameFlagsAt:frameCRCAt])
	return crc32.Update(sum, castagnoli, stored)
}

// newFrameHeader validates the encoder's inputs and returns the header they
// describe, CRC not yet computed.
func newFrameHeader(codec uint8, baseOffset int64, recordCount, uncompressedSize, storedSize int) (FrameHeader, error) {
	switch {
	case recordCount > math.MaxInt32:
		return FrameHeader{}, fmt.Errorf("%w: frame: record count %d over int32", ErrTooLarge, recordCount)
	case recordCount < 1:
		return FrameHeader{}, fmt.Errorf("%w: frame: record count %d, want at least 1", ErrInvalidInput, recordCount)
	case uncompressedSize < 0:
		return FrameHeader{}, fmt.Errorf("%w: frame: negative uncompressed size %d", ErrInvalidInput, uncompressedSize)
	case uncompressedSize > MaxFrameBytes:
		return FrameHeader{}, fmt.Errorf("%w: frame: uncompressed size %d over the %d-byte frame bound", ErrTooLarge, uncompressedSize, MaxFrameBytes)
	case storedSize > MaxFrameBytes-FrameHeaderSize:
		return FrameHeader{}, fmt.Errorf("%w: frame: stored payload of %d bytes makes the frame longer than %d bytes", ErrTooLarge, storedSize, MaxFrameBytes)
	}
	h := FrameHeader{
		Codec:            codec,
		RecordCount:      int32(recordCount),
		BaseOffset:       baseOffset,
		UncompressedSize: uint32(uncompressedSize),
		StoredSize:       uint32(storedSize),
	}
	if problem, bound := headerProblem(h); problem != "" {
		sentinel := ErrInvalidInput
		if bound {
			sentinel = ErrTooLarge
		}
		return FrameHeader{}, fmt.Errorf("%w: frame: %s", sentinel, problem)
	}
	return h, nil
}

// PutFrameHeader writes a frame header, CRC included, into frame[:27] for
// the stored payload frame[27:]. It lets a writer compress straight into a
// buffer after room left for the header. It validates like AppendFrame and
// leaves frame untouched on error.
func PutFrameHeader(frame []byte, codec uint8, baseOffset int64, recordCount, uncompressedSize int) (FrameHeader, error) {
	if len(frame) < FrameHeaderSize {
		return FrameHeader{}, fmt.Errorf("%w: frame: buffer of %d bytes has no room for the %d-byte header", ErrInvalidInput, len(frame), FrameHeaderSize)
	}
	h, err := newFrameHeader(codec, baseOffset, recordCount, uncompressedSize, len(frame)-FrameHeaderSize)
	if err != nil {
		return FrameHeader{}, err
	}
	return writeFrameHeader(frame, h), nil
}

// AppendFrame appends one frame (header, then stored) to dst. stored is the
// payload as it goes on disk, already codec-encoded; uncompressedSize is its
// size before the codec. Errors: ErrTooLarge past MaxFrameBytes or int32
// record counts; ErrInvalidInput for any other header the format forbids
// (see FrameHeader). On error dst is returned unchanged.
func AppendFrame(dst []byte, codec uint8, baseOffset int64, recordCount, uncompressedSize int, stored []byte) ([]byte, error) {
	h, err := newFrameHeader(codec, baseOffset, recordCount, uncompressedSize, len(stored))
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = slices.Grow(dst, FrameHeaderSize+len(stored))
	dst = append(dst, make([]byte, FrameHeaderSize)...)
	dst = append(dst, stored...)
	writeFrameHeader(dst[start:], h)
	return dst, nil
}

// writeFrameHeader lays out the validated header h in frame[:27] and fills
// in the CRC over it and the stored payload frame[27:].
func writeFrameHeader(frame []byte, h FrameHeader) FrameHeader {
	binary.BigEndian.PutUint16(frame, FrameMagic)
	frame[frameFlagsAt] = h.Codec
	binary.BigEndian.PutUint32(frame[frameCountAt:], uint32(h.RecordCount))
	binary.BigEndian.PutUint64(frame[frameBaseAt:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(frame[frameUncompressedAt:], h.UncompressedSize)
	binary.BigEndian.PutUint32(frame[frameStoredAt:], h.StoredSize)
	h.CRC = frameCRC(frame[:FrameHeaderSize], frame[FrameHeaderSize:])
	binary.BigEndian.PutUint32(frame[frameCRCAt:], h.CRC)
	return h
}
