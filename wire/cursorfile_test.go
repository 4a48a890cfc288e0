package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

func cursorSlot(t testing.TB, seq uint64, pos int64) []byte {
	t.Helper()
	b, err := EncodeCursorSlot(CursorSlot{Sequence: seq, Position: pos})
	if err != nil {
		t.Fatal(err)
	}
	return b[:]
}

func cursorFile(a, b []byte) []byte {
	if b == nil {
		return bytes.Clone(a)
	}
	out := make([]byte, CursorSlotStride+len(b))
	copy(out, a)
	copy(out[CursorSlotStride:], b)
	return out
}

func TestCursorSlot_RoundTripAndRefusals(t *testing.T) {
	s := CursorSlot{Sequence: 1<<40 + 3, Position: 511}
	b, err := EncodeCursorSlot(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeCursorSlot(b[:]); err != nil || got != s {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, s)
	}
	if _, err := EncodeCursorSlot(CursorSlot{Position: -1}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("a negative position: %v, want ErrInvalidInput", err)
	}
	for i := range CursorSlotSize {
		if _, err := DecodeCursorSlot(b[:i]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("%d of %d bytes: %v, want ErrTruncated", i, CursorSlotSize, err)
		}
	}
	for i := range CursorSlotSize * 8 { // every single bit flipped
		bad := b
		bad[i/8] ^= 1 << (i % 8)
		if _, err := DecodeCursorSlot(bad[:]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
}

func TestDecodeCursorFile(t *testing.T) {
	older := cursorSlot(t, 4, 255)
	newer := cursorSlot(t, 5, 256)
	torn := bytes.Clone(newer)
	torn[20] ^= 0xff
	legacy, _ := EncodeOffsetFile(511)
	for _, c := range []struct {
		name    string
		file    []byte
		present bool
		legacy  bool
		index   int
		pos     int64
		err     error
	}{
		{"empty", nil, false, false, 0, 0, nil},
		{"older format", legacy[:], true, true, 0, 511, nil},
		{"older format, negative", []byte{0x80, 0, 0, 0, 0, 0, 0, 1}, false, false, 0, 0, ErrCorrupt},
		{"slot 0 alone", cursorFile(older, nil), true, false, 0, 255, nil},
		{"slot 1 newer", cursorFile(older, newer), true, false, 1, 256, nil},
		{"slot 0 newer", cursorFile(newer, older), true, false, 0, 256, nil},
		{"slot 1 torn", cursorFile(older, torn), true, false, 0, 255, nil},
		{"slot 1 short", cursorFile(older, newer[:7]), true, false, 0, 255, nil},
		{"slot 1 past a gap of zeros only", cursorFile(older, []byte{}), true, false, 0, 255, nil},
		{"slot 0 torn, slot 1 valid", cursorFile(torn, older), true, false, 1, 255, nil},
		{"a tie takes the lower position", cursorFile(cursorSlot(t, 5, 300), cursorSlot(t, 5, 200)), true, false, 1, 200, nil},
		{"8 bytes opening with the magic", newer[:8], false, false, 0, 0, ErrCorrupt},
		{"both torn", cursorFile(torn, torn), false, false, 0, 0, ErrCorrupt},
		{"too long", append(cursorFile(older, newer), 0), false, false, 0, 0, ErrCorrupt},
	} {
		st, err := DecodeCursorFile(c.file)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%s: %v, want %v", c.name, err, c.err)
			}
			continue
		}
		if err != nil || st.Present != c.present || st.Legacy != c.legacy || st.Index != c.index || st.Slot.Position != c.pos {
			t.Errorf("%s: %+v, %v; want present %v legacy %v slot %d position %d", c.name, st, err, c.present, c.legacy, c.index, c.pos)
		}
	}
}

// TestDecodeCursorFile_AShortWriteOfASlotLeavesTheOtherSlot: a slot
// written over for only k of its bytes, for every k, in a file whose other
// slot holds the older position: the decode is the older position or the
// newer one, never another.
func TestDecodeCursorFile_AShortWriteOfASlotLeavesTheOtherSlot(t *testing.T) {
	for _, target := range []int{0, 1} {
		prev := cursorSlot(t, 7, 512)  // what the target slot held
		other := cursorSlot(t, 8, 511) // the newest, in the other slot
		next := cursorSlot(t, 9, 256)  // the write-out
		for k := 0; k <= CursorSlotSize; k++ {
			written := append(bytes.Clone(next[:k]), prev[k:]...)
			file := cursorFile(other, written)
			if target == 0 {
				file = cursorFile(written, other)
			}
			st, err := DecodeCursorFile(file)
			if err != nil || (st.Slot.Position != 511 && st.Slot.Position != 256) || (k == CursorSlotSize) != (st.Slot.Position == 256) {
				t.Fatalf("slot %d, %d of %d bytes written: %+v, %v; want 511 (or 256 when whole)", target, k, CursorSlotSize, st, err)
			}
		}
	}
}

func FuzzDecodeCursorSlot(f *testing.F) {
	f.Add(cursorSlot(f, 1, 0), false)
	f.Add(cursorSlot(f, 1<<63, 1<<62), false)
	f.Add([]byte("NRCU\x01\x00\x00\x00"), true)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		if reseal { // force the magic and a good CRC to reach the checks behind them
			fixed := make([]byte, CursorSlotSize)
			copy(fixed, b)
			copy(fixed, CursorMagic)
			b = resealCursorSlot(fixed)
		}
		s, err := DecodeCursorSlot(b)
		if err != nil {
			if !errorIsAny(err, ErrCorrupt, ErrTruncated) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		again, err := EncodeCursorSlot(s)
		if err != nil || !bytes.Equal(again[:], b) {
			t.Fatalf("re-encoding a valid slot %+v: %x, %v; input %x", s, again, err, b)
		}
	})
}

func FuzzDecodeCursorFile(f *testing.F) {
	a, b := cursorSlot(f, 5, 10), cursorSlot(f, 6, 13)
	legacy, _ := EncodeOffsetFile(99)
	f.Add(cursorFile(a, b))
	f.Add(cursorFile(b, a))
	f.Add(cursorFile(a, nil))
	f.Add(legacy[:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, file []byte) {
		st, err := DecodeCursorFile(file)
		if err != nil {
			if !errorIsAny(err, ErrCorrupt) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if !st.Present {
			if len(file) != 0 {
				t.Fatalf("%d bytes decoded as no position", len(file))
			}
			return
		}
		if st.Slot.Position < 0 {
			t.Fatalf("negative position %d", st.Slot.Position)
		}
		if st.Legacy {
			return
		}
		// The winner is a valid slot, and no other valid slot is newer.
		start := int(CursorSlotOffset(st.Index))
		if s, err := DecodeCursorSlot(file[start:min(start+CursorSlotSize, len(file))]); err != nil || s != st.Slot {
			t.Fatalf("winning slot %d re-decodes as %+v, %v; want %+v", st.Index, s, err, st.Slot)
		}
		if other := int(CursorSlotOffset(1 - st.Index)); other < len(file) {
			if s, err := DecodeCursorSlot(file[other:min(other+CursorSlotSize, len(file))]); err == nil && newerCursor(s, st.Slot) {
				t.Fatalf("slot %d (%+v) is newer than the winner %+v", 1-st.Index, s, st.Slot)
			}
		}
	})
}

// resealCursorSlot sets a slot's CRC to match its bytes.
func resealCursorSlot(b []byte) []byte {
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[cursorCRCAt:], crc32.Checksum(b[:cursorCRCAt], castagnoli))
	return b
}
