package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// consumer.ahead constants. Part of the on-disk format; the slot layout is
// drawn in doc.go.
const (
	// AheadSlotSize is the size of one consumer.ahead slot.
	AheadSlotSize = 4096
	// AheadFileSize is the size of a consumer.ahead file with both slots.
	AheadFileSize = 2 * AheadSlotSize
	// AheadMagic opens every slot.
	AheadMagic = "NRCA"
	// AheadVersion is the slot layout version this package reads and writes.
	AheadVersion = 1
	// AheadListCapacity is the room for the acked-ahead list in a slot.
	AheadListCapacity = aheadCRCAt - aheadListAt

	aheadVersionAt     = 4
	aheadFlagsAt       = 5
	aheadReservedAt    = 6
	aheadSequenceAt    = 8
	aheadIncarnationAt = 16
	aheadFrontierAt    = 24
	aheadCountAt       = 32
	aheadListLenAt     = 36
	aheadListAt        = 40
	aheadCRCAt         = AheadSlotSize - 4

	aheadFlagTruncated = 0x01 // the acked-ahead set did not fit: only its lowest offsets are stored
)

// AheadRecord is one consumer.ahead record: the consumer frontier and the
// offsets acked out of order above it.
//   - Frontier >= 0 is the lowest offset not yet acked.
//   - Ahead is strictly increasing and every element is > Frontier.
//   - Truncated: the set did not fit in a slot; Ahead holds its lowest
//     offsets, the rest are forgotten (and redelivered after a crash).
//   - Incarnation is the topic incarnation the record belongs to, empty
//     when the topic record carries no id.
type AheadRecord struct {
	Sequence    uint64 // write sequence: of two valid slots the larger wins
	Incarnation IncarnationID
	Frontier    int64
	Ahead       []int64
	Truncated   bool
}

// AheadSlotOffset is the byte position of slot i (0 or 1) in the file. It
// panics for any other i: writing a slot elsewhere is a bug.
func AheadSlotOffset(i int) int64 {
	if i != 0 && i != 1 {
		panic(fmt.Sprintf("wire: consumer.ahead slot %d, want 0 or 1", i))
	}
	return int64(i) * AheadSlotSize
}

// EncodeAheadSlot writes rec into dst, a whole slot, and returns how many
// offsets of rec.Ahead it stored. When the set does not fit it stores the
// lowest offsets that do (the ones nearest the frontier) and sets the
// truncated flag; the frontier is stored as given either way, so it never
// passes an unacked offset. rec breaking an AheadRecord invariant, or an
// invalid incarnation id, is ErrInvalidInput and leaves dst untouched.
func EncodeAheadSlot(dst *[AheadSlotSize]byte, rec AheadRecord) (stored int, err error) {
	incarnation, err := rec.Incarnation.Bytes()
	if err != nil {
		return 0, fmt.Errorf("%w: consumer.ahead slot: %s", ErrInvalidInput, err)
	}
	if rec.Frontier < 0 {
		return 0, fmt.Errorf("%w: consumer.ahead slot: negative frontier %d", ErrInvalidInput, rec.Frontier)
	}
	previous := rec.Frontier
	for i, offset := range rec.Ahead {
		if offset <= previous {
			return 0, fmt.Errorf("%w: consumer.ahead slot: acked-ahead offset %d (index %d) not above %d", ErrInvalidInput, offset, i, previous)
		}
		previous = offset
	}

	*dst = [AheadSlotSize]byte{}
	list := dst[aheadListAt:aheadCRCAt]
	listLen := 0
	previous = rec.Frontier
	for _, offset := range rec.Ahead {
		gap := uint64(offset-previous) - 1
		if uvarintLen(gap) > len(list)-listLen {
			break
		}
		listLen += binary.PutUvarint(list[listLen:], gap)
		previous = offset
		stored++
	}

	copy(dst[:], AheadMagic)
	dst[aheadVersionAt] = AheadVersion
	if rec.Truncated || stored < len(rec.Ahead) {
		dst[aheadFlagsAt] = aheadFlagTruncated
	}
	binary.BigEndian.PutUint64(dst[aheadSequenceAt:], rec.Sequence)
	copy(dst[aheadIncarnationAt:], incarnation[:])
	binary.BigEndian.PutUint64(dst[aheadFrontierAt:], uint64(rec.Frontier))
	binary.BigEndian.PutUint32(dst[aheadCountAt:], uint32(stored))
	binary.BigEndian.PutUint32(dst[aheadListLenAt:], uint32(listLen))
	binary.BigEndian.PutUint32(dst[aheadCRCAt:], crc32.Checksum(dst[:aheadCRCAt], castagnoli))
	return stored, nil
}

// DecodeAheadSlot decodes one slot. A buffer shorter than a slot is
// ErrTruncated (a torn slot); every other defect is ErrCorrupt: length,
// magic, CRC, version, flags or reserved bits, a negative frontier, a count
// or list length the slot cannot hold, a malformed or non-minimal uvarint,
// an offset past int64, list bytes left over, non-zero padding. It
// allocates at most one slice of AheadListCapacity int64s.
func DecodeAheadSlot(b []byte) (AheadRecord, error) {
	if len(b) < AheadSlotSize {
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: %d of %d bytes", ErrTruncated, len(b), AheadSlotSize)
	}
	if len(b) > AheadSlotSize {
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: %d bytes, want %d", ErrCorrupt, len(b), AheadSlotSize)
	}
	if string(b[:len(AheadMagic)]) != AheadMagic {
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: magic %q, want %q", ErrCorrupt, b[:len(AheadMagic)], AheadMagic)
	}
	if want, got := binary.BigEndian.Uint32(b[aheadCRCAt:]), crc32.Checksum(b[:aheadCRCAt], castagnoli); got != want {
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: crc32c 0x%08x, slot says 0x%08x", ErrCorrupt, got, want)
	}
	if v := b[aheadVersionAt]; v != AheadVersion {
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: version %d, want %d", ErrCorrupt, v, AheadVersion)
	}
	flags := b[aheadFlagsAt]
	if flags&^aheadFlagTruncated != 0 {
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: unknown flags 0x%02x", ErrCorrupt, flags)
	}
	if b[aheadReservedAt] != 0 || b[aheadReservedAt+1] != 0 {
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: reserved bytes 0x%02x%02x, want zero", ErrCorrupt, b[aheadReservedAt], b[aheadReservedAt+1])
	}
	rec := AheadRecord{
		Sequence:    binary.BigEndian.Uint64(b[aheadSequenceAt:]),
		Incarnation: IncarnationIDFromBytes([8]byte(b[aheadIncarnationAt:aheadFrontierAt])),
		Frontier:    int64(binary.BigEndian.Uint64(b[aheadFrontierAt:])),
		Truncated:   flags&aheadFlagTruncated != 0,
	}
	if rec.Frontier < 0 {
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: negative frontier %d", ErrCorrupt, rec.Frontier)
	}
	count := binary.BigEndian.Uint32(b[aheadCountAt:])
	listLen := binary.BigEndian.Uint32(b[aheadListLenAt:])
	if listLen > AheadListCapacity {
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: list length %d over the %d bytes a slot holds", ErrCorrupt, listLen, AheadListCapacity)
	}
	if count > listLen { // every uvarint takes at least one byte
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: %d offsets cannot fit in %d list bytes", ErrCorrupt, count, listLen)
	}
	list := b[aheadListAt : aheadListAt+int(listLen)]
	for i, c := range b[aheadListAt+int(listLen) : aheadCRCAt] {
		if c != 0 {
			return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: non-zero padding at byte %d", ErrCorrupt, aheadListAt+int(listLen)+i)
		}
	}
	var err error
	if rec.Ahead, err = decodeGaps(list, int(count), rec.Frontier); err != nil {
		return AheadRecord{}, fmt.Errorf("%w: consumer.ahead slot: %s", ErrCorrupt, err)
	}
	return rec, nil
}

// decodeGaps reads count offsets above frontier from list, each a minimal
// uvarint of its gap to the one before less one, and every byte of list
// with them (the acked-ahead list of consumer.ahead and consumer.acked).
// It allocates one slice of count offsets, which the caller has bounded.
func decodeGaps(list []byte, count int, frontier int64) ([]int64, error) {
	if count == 0 && len(list) == 0 {
		return nil, nil
	}
	out := make([]int64, 0, count)
	previous, pos := frontier, 0
	for i := range count {
		gap, n, err := readMinimalUvarint(list[pos:])
		if err != nil {
			return nil, fmt.Errorf("offset %d of %d: %s", i, count, err)
		}
		if gap >= uint64(math.MaxInt64-previous) { // previous + 1 + gap must stay <= MaxInt64
			return nil, fmt.Errorf("offset %d of %d: %d + 1 + %d overflows int64", i, count, previous, gap)
		}
		previous += 1 + int64(gap)
		out = append(out, previous)
		pos += n
	}
	if pos != len(list) {
		return nil, fmt.Errorf("%d list bytes left after %d offsets", len(list)-pos, count)
	}
	return out, nil
}

// AheadFile is what DecodeAheadFile found in a consumer.ahead file.
type AheadFile struct {
	// Present is false for an empty file: no record was ever written.
	Present bool
	// Record is the valid record of the expected incarnation with the
	// larger sequence.
	Record AheadRecord
	// Slot is the slot Record came from; the writer's next write goes to
	// the other one.
	Slot int
	// Rejected says why a slot whose bytes are present could not be used
	// (torn, corrupt, or ErrForeignIncarnation); nil for a valid slot,
	// winner or not, and for a slot past the end of a one-slot file.
	Rejected [2]error
}

// DecodeAheadFile decodes a whole consumer.ahead file and picks the record
// to recover. An empty file is not present (nil error). A file of one slot
// (4096 bytes: a crash before the second slot was first written) or of one
// slot and part of the second (a torn second slot) decodes the slots it
// holds; a file longer than two slots is ErrCorrupt. A slot is usable when
// it decodes and belongs to incarnation (the empty id matches only slots
// written without one). Of two usable slots the larger sequence wins; on a
// tie the lower frontier, then slot 0, so recovery never moves ahead of
// what either slot promises. No usable slot is ErrCorrupt, wrapping each
// slot's reason.
func DecodeAheadFile(b []byte, incarnation IncarnationID) (AheadFile, error) {
	if _, err := incarnation.Bytes(); err != nil {
		return AheadFile{}, fmt.Errorf("%w: consumer.ahead: expected %s", ErrInvalidInput, err)
	}
	if len(b) == 0 {
		return AheadFile{}, nil
	}
	if len(b) > AheadFileSize {
		return AheadFile{}, fmt.Errorf("%w: consumer.ahead: %d bytes, longer than two %d-byte slots", ErrCorrupt, len(b), AheadSlotSize)
	}
	var (
		file   AheadFile
		usable [2]bool
		recs   [2]AheadRecord
	)
	for slot := range 2 {
		start := int(AheadSlotOffset(slot))
		if start >= len(b) {
			break
		}
		rec, err := DecodeAheadSlot(b[start:min(start+AheadSlotSize, len(b))])
		if err == nil && rec.Incarnation != incarnation {
			err = fmt.Errorf("%w: consumer.ahead slot: incarnation %q, want %q", ErrForeignIncarnation, rec.Incarnation, incarnation)
		}
		if err != nil {
			file.Rejected[slot] = fmt.Errorf("slot %d: %w", slot, err)
			continue
		}
		recs[slot], usable[slot] = rec, true
	}
	switch {
	case usable[0] && usable[1]:
		file.Slot = 0
		if newerAhead(recs[1], recs[0]) {
			file.Slot = 1
		}
	case usable[0]:
		file.Slot = 0
	case usable[1]:
		file.Slot = 1
	default:
		if file.Rejected[1] == nil {
			return AheadFile{}, fmt.Errorf("%w: consumer.ahead: no usable slot: %w", ErrCorrupt, file.Rejected[0])
		}
		return AheadFile{}, fmt.Errorf("%w: consumer.ahead: no usable slot: %w; %w", ErrCorrupt, file.Rejected[0], file.Rejected[1])
	}
	file.Present = true
	file.Record = recs[file.Slot]
	return file, nil
}

// newerAhead reports whether a should win over b.
func newerAhead(a, b AheadRecord) bool {
	if a.Sequence != b.Sequence {
		return a.Sequence > b.Sequence
	}
	return a.Frontier < b.Frontier
}
