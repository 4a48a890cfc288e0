package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// scrub.progress constants. Part of the on-disk format: a partition
// directory's scrub.progress says where the background scrubber
// (docs/design.md, "Scrubber") stands in that partition, so a restart
// resumes there. It is replaced whole (a temporary file renamed over it),
// never written in place.
//
//	offset 0   magic      4B  "NRSP"
//	offset 4   version    1B  1
//	offset 5   reserved   3B  zero
//	offset 8   next       8B  big-endian int64: the base offset of the
//	                          first sealed segment the pass under way has
//	                          not checked yet (0: a pass starts over)
//	offset 16  completed  8B  big-endian int64: Unix milliseconds when the
//	                          partition's last whole pass ended; 0: never
//	offset 24  crc32c     4B  Castagnoli over bytes [0, 24)
const (
	// ScrubProgressFileName is the scrubber's progress in a partition
	// directory. Never transferred by a move: the new owner scrubs from
	// the start.
	ScrubProgressFileName = "scrub.progress"
	// ScrubProgressMagic opens a scrub.progress file.
	ScrubProgressMagic = "NRSP"
	// ScrubProgressVersion is the layout version this package reads and
	// writes.
	ScrubProgressVersion = 1
	// ScrubProgressFileSize is the size of a scrub.progress file.
	ScrubProgressFileSize = 28

	scrubProgressVersionAt   = 4
	scrubProgressNextAt      = 8
	scrubProgressCompletedAt = 16
	scrubProgressCRCAt       = 24
)

// ScrubProgress is what a scrub.progress file holds.
type ScrubProgress struct {
	// Next is the base offset of the first sealed segment the pass under
	// way has not checked; 0 when the next pass starts from the oldest.
	Next int64
	// CompletedUnixMs is when the partition's last whole pass ended, in
	// Unix milliseconds; 0 when none has.
	CompletedUnixMs int64
}

// EncodeScrubProgress is the content of a scrub.progress file holding p.
// A negative field is ErrInvalidInput.
func EncodeScrubProgress(p ScrubProgress) ([ScrubProgressFileSize]byte, error) {
	var b [ScrubProgressFileSize]byte
	if p.Next < 0 || p.CompletedUnixMs < 0 {
		return b, fmt.Errorf("%w: scrub.progress: negative field in %+v", ErrInvalidInput, p)
	}
	copy(b[:], ScrubProgressMagic)
	b[scrubProgressVersionAt] = ScrubProgressVersion
	binary.BigEndian.PutUint64(b[scrubProgressNextAt:], uint64(p.Next))
	binary.BigEndian.PutUint64(b[scrubProgressCompletedAt:], uint64(p.CompletedUnixMs))
	binary.BigEndian.PutUint32(b[scrubProgressCRCAt:], crc32.Checksum(b[:scrubProgressCRCAt], castagnoli))
	return b, nil
}

// DecodeScrubProgress reads a scrub.progress file. Any length but
// ScrubProgressFileSize, the magic, the checksum, the version, reserved
// bytes that are not zero or a negative field is ErrCorrupt: the caller
// starts the partition's pass over, which costs reading it again and
// loses nothing.
func DecodeScrubProgress(b []byte) (ScrubProgress, error) {
	if len(b) != ScrubProgressFileSize {
		return ScrubProgress{}, fmt.Errorf("%w: scrub.progress: %d bytes, want %d", ErrCorrupt, len(b), ScrubProgressFileSize)
	}
	if string(b[:len(ScrubProgressMagic)]) != ScrubProgressMagic {
		return ScrubProgress{}, fmt.Errorf("%w: scrub.progress: magic %q, want %q", ErrCorrupt, b[:len(ScrubProgressMagic)], ScrubProgressMagic)
	}
	if got, want := crc32.Checksum(b[:scrubProgressCRCAt], castagnoli), binary.BigEndian.Uint32(b[scrubProgressCRCAt:]); got != want {
		return ScrubProgress{}, fmt.Errorf("%w: scrub.progress: crc32c 0x%08x, file says 0x%08x", ErrCorrupt, got, want)
	}
	if v := b[scrubProgressVersionAt]; v != ScrubProgressVersion {
		return ScrubProgress{}, fmt.Errorf("%w: scrub.progress: version %d, want %d", ErrCorrupt, v, ScrubProgressVersion)
	}
	for _, c := range b[scrubProgressVersionAt+1 : scrubProgressNextAt] {
		if c != 0 {
			return ScrubProgress{}, fmt.Errorf("%w: scrub.progress: reserved bytes not zero", ErrCorrupt)
		}
	}
	p := ScrubProgress{
		Next:            int64(binary.BigEndian.Uint64(b[scrubProgressNextAt:])),
		CompletedUnixMs: int64(binary.BigEndian.Uint64(b[scrubProgressCompletedAt:])),
	}
	if p.Next < 0 || p.CompletedUnixMs < 0 {
		return ScrubProgress{}, fmt.Errorf("%w: scrub.progress: negative field", ErrCorrupt)
	}
	return p, nil
}
