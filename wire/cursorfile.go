package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Cursor file constants. Part of the on-disk format; the layout is drawn
// in doc.go.
const (
	// CursorSlotStride is the distance between the starts of a cursor
	// file's two slots: a sector or page torn while one slot is written
	// never touches the other.
	CursorSlotStride = 4096
	// CursorSlotSize is the size of one slot.
	CursorSlotSize = 28
	// CursorFileSize is the size of a cursor file with both slots written.
	CursorFileSize = CursorSlotStride + CursorSlotSize
	// CursorMagic opens every slot.
	CursorMagic = "NRCU"
	// CursorVersion is the slot layout version this package reads and writes.
	CursorVersion = 1

	cursorVersionAt  = 4
	cursorReservedAt = 5
	cursorSequenceAt = 8
	cursorPositionAt = 16
	cursorCRCAt      = 24
)

// CursorSlot is one slot of a cursor file: a position and the write
// sequence that orders it against the other slot.
type CursorSlot struct {
	Sequence uint64
	Position int64 // >= 0
}

// CursorSlotOffset is the byte position of slot i (0 or 1) in the file. It
// panics for any other i: writing a slot elsewhere is a bug.
func CursorSlotOffset(i int) int64 {
	if i != 0 && i != 1 {
		panic(fmt.Sprintf("wire: cursor slot %d, want 0 or 1", i))
	}
	return int64(i) * CursorSlotStride
}

// EncodeCursorSlot is the content of a slot holding s. A negative position
// is ErrInvalidInput.
func EncodeCursorSlot(s CursorSlot) ([CursorSlotSize]byte, error) {
	var b [CursorSlotSize]byte
	if s.Position < 0 {
		return b, fmt.Errorf("%w: cursor slot: negative position %d", ErrInvalidInput, s.Position)
	}
	copy(b[:], CursorMagic)
	b[cursorVersionAt] = CursorVersion
	binary.BigEndian.PutUint64(b[cursorSequenceAt:], s.Sequence)
	binary.BigEndian.PutUint64(b[cursorPositionAt:], uint64(s.Position))
	binary.BigEndian.PutUint32(b[cursorCRCAt:], crc32.Checksum(b[:cursorCRCAt], castagnoli))
	return b, nil
}

// DecodeCursorSlot decodes one slot. A buffer shorter than a slot is
// ErrTruncated (a short or torn write); every other defect is ErrCorrupt:
// length, magic, CRC, version, reserved bytes, a negative position.
func DecodeCursorSlot(b []byte) (CursorSlot, error) {
	if len(b) < CursorSlotSize {
		return CursorSlot{}, fmt.Errorf("%w: cursor slot: %d of %d bytes", ErrTruncated, len(b), CursorSlotSize)
	}
	if len(b) > CursorSlotSize {
		return CursorSlot{}, fmt.Errorf("%w: cursor slot: %d bytes, want %d", ErrCorrupt, len(b), CursorSlotSize)
	}
	if string(b[:len(CursorMagic)]) != CursorMagic {
		return CursorSlot{}, fmt.Errorf("%w: cursor slot: magic %q, want %q", ErrCorrupt, b[:len(CursorMagic)], CursorMagic)
	}
	if want, got := binary.BigEndian.Uint32(b[cursorCRCAt:]), crc32.Checksum(b[:cursorCRCAt], castagnoli); got != want {
		return CursorSlot{}, fmt.Errorf("%w: cursor slot: crc32c 0x%08x, slot says 0x%08x", ErrCorrupt, got, want)
	}
	if v := b[cursorVersionAt]; v != CursorVersion {
		return CursorSlot{}, fmt.Errorf("%w: cursor slot: version %d, want %d", ErrCorrupt, v, CursorVersion)
	}
	for _, c := range b[cursorReservedAt:cursorSequenceAt] {
		if c != 0 {
			return CursorSlot{}, fmt.Errorf("%w: cursor slot: reserved bytes %x, want zero", ErrCorrupt, b[cursorReservedAt:cursorSequenceAt])
		}
	}
	s := CursorSlot{Sequence: binary.BigEndian.Uint64(b[cursorSequenceAt:]), Position: int64(binary.BigEndian.Uint64(b[cursorPositionAt:]))}
	if s.Position < 0 {
		return CursorSlot{}, fmt.Errorf("%w: cursor slot: negative position %d", ErrCorrupt, s.Position)
	}
	return s, nil
}

// EncodeCursorFile is the content of a new cursor file holding position:
// slot 0 alone, sequence 1.
func EncodeCursorFile(position int64) ([]byte, error) {
	slot, err := EncodeCursorSlot(CursorSlot{Sequence: 1, Position: position})
	if err != nil {
		return nil, err
	}
	return slot[:], nil
}

// CursorState is what DecodeCursorFile found in a cursor file.
type CursorState struct {
	// Present is false for an empty file: nothing was ever written.
	Present bool
	// Legacy: the file is in the older 8-byte format (consumer.offset's);
	// Slot.Sequence is 0 and Index 0. A writer replaces the whole file
	// rather than write a slot into it.
	Legacy bool
	// Slot is the winning slot's content; Index is where it came from
	// (the writer's next write goes to the other slot).
	Slot  CursorSlot
	Index int
	// Rejected says why a slot whose bytes are present could not be used;
	// nil for a valid slot, winner or not, and for a slot past the end.
	Rejected [2]error
}

// DecodeCursorFile decodes a whole cursor file. An empty file is not
// present. A file of exactly 8 bytes that does not open with CursorMagic
// is the older format: one big-endian int64 >= 0. Otherwise it is read as
// two slots, slot 0 at byte 0 and slot 1 at CursorSlotStride (the bytes
// between them are never written and not read); a file longer than
// CursorFileSize is ErrCorrupt. Of two valid slots the larger sequence
// wins; on a tie the lower position, then slot 0, so a decode never moves
// a cursor ahead of what either slot holds. No valid slot is ErrCorrupt,
// wrapping each slot's reason: the file is damaged.
func DecodeCursorFile(b []byte) (CursorState, error) {
	switch {
	case len(b) == 0:
		return CursorState{}, nil
	case len(b) == OffsetFileSize && string(b[:len(CursorMagic)]) != CursorMagic:
		v, _, err := DecodeOffsetFile(b)
		if err != nil {
			return CursorState{}, fmt.Errorf("cursor file, older format: %w", err)
		}
		return CursorState{Present: true, Legacy: true, Slot: CursorSlot{Position: v}}, nil
	case len(b) > CursorFileSize:
		return CursorState{}, fmt.Errorf("%w: cursor file: %d bytes, longer than %d", ErrCorrupt, len(b), CursorFileSize)
	}
	var (
		st    CursorState
		valid [2]bool
		slots [2]CursorSlot
	)
	for i := range 2 {
		start := int(CursorSlotOffset(i))
		if start >= len(b) {
			break
		}
		s, err := DecodeCursorSlot(b[start:min(start+CursorSlotSize, len(b))])
		if err != nil {
			st.Rejected[i] = fmt.Errorf("slot %d: %w", i, err)
			continue
		}
		slots[i], valid[i] = s, true
	}
	switch {
	case valid[0] && valid[1]:
		if newerCursor(slots[1], slots[0]) {
			st.Index = 1
		}
	case valid[0]:
	case valid[1]:
		st.Index = 1
	case st.Rejected[1] == nil:
		return CursorState{}, fmt.Errorf("%w: cursor file: no valid slot: %w", ErrCorrupt, st.Rejected[0])
	default:
		return CursorState{}, fmt.Errorf("%w: cursor file: no valid slot: %w; %w", ErrCorrupt, st.Rejected[0], st.Rejected[1])
	}
	st.Present = true
	st.Slot = slots[st.Index]
	return st, nil
}

// newerCursor reports whether a should win over b.
func newerCursor(a, b CursorSlot) bool {
	if a.Sequence != b.Sequence {
		return a.Sequence > b.Sequence
	}
	return a.Position < b.Position
}
