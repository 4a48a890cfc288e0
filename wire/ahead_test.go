package wire

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"
)

const testID = IncarnationID("3f9a1c0e7b2d4a61")

func encodeSlot(t testing.TB, rec AheadRecord) []byte {
	t.Helper()
	var slot [AheadSlotSize]byte
	if _, err := EncodeAheadSlot(&slot, rec); err != nil {
		t.Fatal(err)
	}
	return slot[:]
}

// resealSlot recomputes a slot's CRC after a test changed a field, so the
// check under test is the one that fires, not the CRC.
func resealSlot(slot []byte) []byte {
	binary.BigEndian.PutUint32(slot[aheadCRCAt:], crc32.Checksum(slot[:aheadCRCAt], castagnoli))
	return slot
}

func TestAheadSlot_RoundTrip(t *testing.T) {
	cases := []AheadRecord{
		{},
		{Sequence: 1, Incarnation: testID, Frontier: 0},
		{Sequence: math.MaxUint64, Incarnation: testID, Frontier: 7, Ahead: []int64{8, 9, 10, 1 << 40, math.MaxInt64}},
		{Sequence: 3, Frontier: math.MaxInt64},
		{Sequence: 4, Frontier: 5, Ahead: []int64{100}, Truncated: true},
	}
	for _, rec := range cases {
		got, err := DecodeAheadSlot(encodeSlot(t, rec))
		if err != nil {
			t.Fatalf("%+v: %v", rec, err)
		}
		assertAheadRecord(t, got, rec)
	}
}

func TestAheadSlot_LayoutOffsets(t *testing.T) {
	slot := encodeSlot(t, AheadRecord{Sequence: 0x0102030405060708, Incarnation: testID, Frontier: 0x1112131415161718, Ahead: []int64{0x1112131415161718 + 1}})
	if string(slot[0:4]) != "NRCA" || slot[4] != 1 || slot[5] != 0 || slot[6] != 0 || slot[7] != 0 {
		t.Fatalf("header %x", slot[:8])
	}
	if binary.BigEndian.Uint64(slot[8:]) != 0x0102030405060708 ||
		!bytes.Equal(slot[16:24], []byte{0x3f, 0x9a, 0x1c, 0x0e, 0x7b, 0x2d, 0x4a, 0x61}) ||
		binary.BigEndian.Uint64(slot[24:]) != 0x1112131415161718 ||
		binary.BigEndian.Uint32(slot[32:]) != 1 || binary.BigEndian.Uint32(slot[36:]) != 1 || slot[40] != 0 {
		t.Fatalf("fields %x", slot[:44])
	}
	if binary.BigEndian.Uint32(slot[4092:]) != crc32cBitwise(slot[:4092]) {
		t.Fatal("crc at 4092 is not crc32c over [0:4092]")
	}
	if AheadSlotOffset(0) != 0 || AheadSlotOffset(1) != 4096 || AheadFileSize != 8192 {
		t.Fatal("slot offsets")
	}
}

func TestAheadSlotOffset_PanicsOutsideTwoSlots(t *testing.T) {
	for _, i := range []int{-1, 2} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AheadSlotOffset(%d) did not panic", i)
				}
			}()
			AheadSlotOffset(i)
		}()
	}
}

func TestAheadSlot_TruncatedSetKeepsFrontier(t *testing.T) {
	// The set does not fit: the lowest offsets (nearest the frontier) are
	// kept, the frontier is stored as given, the flag is set. Offsets that
	// did not fit are redelivered after a crash, never skipped.
	rec := AheadRecord{Sequence: 9, Incarnation: testID, Frontier: 1000}
	next := rec.Frontier
	for range 2000 { // gaps of 1000: two-byte uvarints, 4000 of the 4052 list bytes
		next += 1001
		rec.Ahead = append(rec.Ahead, next)
	}
	for range 100 {
		next += 1 << 40 // six-byte uvarints: only 8 more fit
		rec.Ahead = append(rec.Ahead, next)
	}
	var slot [AheadSlotSize]byte
	stored, err := EncodeAheadSlot(&slot, rec)
	if err != nil {
		t.Fatal(err)
	}
	if stored != 2008 {
		t.Fatalf("stored %d of %d", stored, len(rec.Ahead))
	}
	got, err := DecodeAheadSlot(slot[:])
	if err != nil {
		t.Fatal(err)
	}
	if got.Frontier != rec.Frontier || !got.Truncated || len(got.Ahead) != stored {
		t.Fatalf("frontier %d truncated %v stored %d", got.Frontier, got.Truncated, len(got.Ahead))
	}
	for i, o := range got.Ahead {
		if o != rec.Ahead[i] {
			t.Fatalf("offset %d = %d, want the lowest offsets %d", i, o, rec.Ahead[i])
		}
	}
}

func TestAheadSlot_ListCapacityBoundary(t *testing.T) {
	// Consecutive offsets take one byte each: AheadListCapacity of them fit
	// exactly, one more does not.
	build := func(n int) AheadRecord {
		rec := AheadRecord{Sequence: 1, Frontier: 10}
		for i := range n {
			rec.Ahead = append(rec.Ahead, int64(11+i))
		}
		return rec
	}
	var slot [AheadSlotSize]byte
	if stored, err := EncodeAheadSlot(&slot, build(AheadListCapacity)); err != nil || stored != AheadListCapacity {
		t.Fatalf("full list: stored %d, %v", stored, err)
	}
	if got, err := DecodeAheadSlot(slot[:]); err != nil || got.Truncated || len(got.Ahead) != AheadListCapacity {
		t.Fatalf("full list decoded: %v truncated=%v", err, got.Truncated)
	}
	if stored, err := EncodeAheadSlot(&slot, build(AheadListCapacity+1)); err != nil || stored != AheadListCapacity {
		t.Fatalf("one over: stored %d, %v", stored, err)
	}
	if got, err := DecodeAheadSlot(slot[:]); err != nil || !got.Truncated {
		t.Fatalf("one over decoded: %v truncated=%v", err, got.Truncated)
	}
}

func TestEncodeAheadSlot_Rejects(t *testing.T) {
	cases := []struct {
		name string
		rec  AheadRecord
	}{
		{"negative frontier", AheadRecord{Frontier: -1}},
		{"offset equal to the frontier", AheadRecord{Frontier: 5, Ahead: []int64{5}}},
		{"offset below the frontier", AheadRecord{Frontier: 5, Ahead: []int64{3}}},
		{"duplicate offsets", AheadRecord{Frontier: 5, Ahead: []int64{7, 7}}},
		{"decreasing offsets", AheadRecord{Frontier: 5, Ahead: []int64{9, 7}}},
		{"invalid incarnation", AheadRecord{Incarnation: "XYZ"}},
		{"reserved all-zero incarnation", AheadRecord{Incarnation: "0000000000000000"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var slot [AheadSlotSize]byte
			slot[0] = 0xAA
			stored, err := EncodeAheadSlot(&slot, c.rec)
			wantErr(t, err, ErrInvalidInput)
			if stored != 0 || slot[0] != 0xAA {
				t.Fatal("slot written on error")
			}
		})
	}
}

func TestDecodeAheadSlot_Rejects(t *testing.T) {
	valid := func() []byte {
		return encodeSlot(t, AheadRecord{Sequence: 2, Incarnation: testID, Frontier: 100, Ahead: []int64{102, 300}})
	}
	mutate := func(change func(s []byte)) []byte {
		s := valid()
		change(s)
		return resealSlot(s)
	}
	cases := []struct {
		name string
		slot []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"torn: one byte short", valid()[:AheadSlotSize-1], ErrTruncated},
		{"one byte long", append(valid(), 0), ErrCorrupt},
		{"all zeros", make([]byte, AheadSlotSize), ErrCorrupt},
		{"bad magic", mutate(func(s []byte) { s[0] = 'X' }), ErrCorrupt},
		{"crc mismatch", func() []byte { s := valid(); s[100] ^= 1; return s }(), ErrCorrupt},
		{"crc field flipped", func() []byte { s := valid(); s[4095] ^= 1; return s }(), ErrCorrupt},
		{"version 0", mutate(func(s []byte) { s[4] = 0 }), ErrCorrupt},
		{"version 2", mutate(func(s []byte) { s[4] = 2 }), ErrCorrupt},
		{"unknown flag bit 1", mutate(func(s []byte) { s[5] = 0x02 }), ErrCorrupt},
		{"reserved byte set", mutate(func(s []byte) { s[7] = 1 }), ErrCorrupt},
		{"negative frontier", mutate(func(s []byte) { s[24] = 0x80 }), ErrCorrupt},
		{"list length over the slot", mutate(func(s []byte) { binary.BigEndian.PutUint32(s[36:], AheadListCapacity+1) }), ErrCorrupt},
		{"list length 0xFFFFFFFF", mutate(func(s []byte) { binary.BigEndian.PutUint32(s[36:], 0xFFFFFFFF) }), ErrCorrupt},
		{"count over list length", mutate(func(s []byte) { binary.BigEndian.PutUint32(s[32:], 4) }), ErrCorrupt},
		{"count 0xFFFFFFFF", mutate(func(s []byte) { binary.BigEndian.PutUint32(s[32:], 0xFFFFFFFF) }), ErrCorrupt},
		{"count below the list: trailing list bytes", mutate(func(s []byte) { binary.BigEndian.PutUint32(s[32:], 1) }), ErrCorrupt},
		{"list shorter than count needs", mutate(func(s []byte) { binary.BigEndian.PutUint32(s[36:], 2) }), ErrCorrupt},
		{"non-zero padding", mutate(func(s []byte) { s[2000] = 1 }), ErrCorrupt},
		{"non-minimal uvarint", mutate(func(s []byte) {
			binary.BigEndian.PutUint32(s[32:], 1)
			binary.BigEndian.PutUint32(s[36:], 2)
			copy(s[40:], []byte{0x81, 0x00, 0, 0})
		}), ErrCorrupt},
		{"uvarint over 64 bits", mutate(func(s []byte) {
			binary.BigEndian.PutUint32(s[32:], 1)
			binary.BigEndian.PutUint32(s[36:], 10)
			copy(s[40:], []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02})
		}), ErrCorrupt},
		{"offset past int64", mutate(func(s []byte) {
			binary.BigEndian.PutUint64(s[24:], math.MaxInt64-1)
			binary.BigEndian.PutUint32(s[32:], 2)
			binary.BigEndian.PutUint32(s[36:], 2)
			copy(s[40:], []byte{0x00, 0x00, 0, 0}) // MaxInt64, then MaxInt64+1
		}), ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, err := DecodeAheadSlot(c.slot)
			wantErr(t, err, c.want)
			if !aheadEqual(rec, AheadRecord{}) {
				t.Fatalf("record %+v returned with an error", rec)
			}
		})
	}
}

func TestDecodeAheadSlot_EveryBitFlipIsCorrupt(t *testing.T) {
	// Row 15: an anchor slot bit-flipped anywhere is rejected.
	slot := encodeSlot(t, AheadRecord{Sequence: 2, Incarnation: testID, Frontier: 100, Ahead: []int64{102, 300}})
	for i := range AheadSlotSize * 8 {
		flipped := bytes.Clone(slot)
		flipped[i/8] ^= 1 << (i % 8)
		if _, err := DecodeAheadSlot(flipped); !errorIsAny(err, ErrCorrupt) {
			t.Fatalf("flip of bit %d in byte %d: %v", i%8, i/8, err)
		}
	}
}

func TestDecodeAheadSlot_AllocationBounded(t *testing.T) {
	// I10: one slice of at most AheadListCapacity offsets, one id string.
	rec := AheadRecord{Sequence: 1, Incarnation: testID, Frontier: 0}
	for i := range AheadListCapacity {
		rec.Ahead = append(rec.Ahead, int64(i+1))
	}
	slot := encodeSlot(t, rec)
	if n := testing.AllocsPerRun(50, func() { _, _ = DecodeAheadSlot(slot) }); n > 2 {
		t.Fatalf("DecodeAheadSlot allocates %v times", n)
	}
	var dst [AheadSlotSize]byte
	if n := testing.AllocsPerRun(50, func() { _, _ = EncodeAheadSlot(&dst, rec) }); n != 0 {
		t.Fatalf("EncodeAheadSlot allocates %v times", n)
	}
}

// aheadFile lays two slots (nil for a zero slot) side by side.
func aheadFile(slot0, slot1 []byte) []byte {
	file := make([]byte, AheadFileSize)
	copy(file, slot0)
	copy(file[AheadSlotSize:], slot1)
	return file
}

func TestDecodeAheadFile_PicksNewerValidSlot(t *testing.T) {
	older := AheadRecord{Sequence: 5, Incarnation: testID, Frontier: 10, Ahead: []int64{12}}
	newer := AheadRecord{Sequence: 6, Incarnation: testID, Frontier: 13}
	for _, c := range []struct {
		name     string
		file     []byte
		wantSlot int
	}{
		{"newer in slot 1", aheadFile(encodeSlot(t, older), encodeSlot(t, newer)), 1},
		{"newer in slot 0", aheadFile(encodeSlot(t, newer), encodeSlot(t, older)), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeAheadFile(c.file, testID)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Present || got.Slot != c.wantSlot || got.Rejected != [2]error{} {
				t.Fatalf("got %+v", got)
			}
			assertAheadRecord(t, got.Record, newer)
		})
	}
}

func TestDecodeAheadFile_BadSlotFallsBackToTheOther(t *testing.T) {
	// Row 15: a window slot torn mid-write at each sector, or an anchor
	// slot bit-flipped, is rejected by its checksum and the other is used.
	anchor := AheadRecord{Sequence: 40, Incarnation: testID, Frontier: 500, Ahead: []int64{502}}
	oldWindow := AheadRecord{Sequence: 39, Incarnation: testID, Frontier: 490}
	newWindow := AheadRecord{Sequence: 41, Incarnation: testID, Frontier: 520}
	for sectors := 1; sectors < AheadSlotSize/512; sectors++ {
		torn := encodeSlot(t, oldWindow)
		copy(torn[:sectors*512], encodeSlot(t, newWindow)[:sectors*512])
		got, err := DecodeAheadFile(aheadFile(encodeSlot(t, anchor), torn), testID)
		if err != nil {
			t.Fatalf("window torn after %d sectors: %v", sectors, err)
		}
		if got.Slot != 0 || !errorIsAny(got.Rejected[1], ErrCorrupt) || got.Rejected[0] != nil {
			t.Fatalf("window torn after %d sectors: %+v", sectors, got)
		}
		assertAheadRecord(t, got.Record, anchor)
	}
	flipped := encodeSlot(t, anchor)
	flipped[30] ^= 0x10
	got, err := DecodeAheadFile(aheadFile(flipped, encodeSlot(t, oldWindow)), testID)
	if err != nil || got.Slot != 1 || got.Rejected[0] == nil {
		t.Fatalf("anchor flipped: %+v, %v", got, err)
	}
	assertAheadRecord(t, got.Record, oldWindow)
}

func TestDecodeAheadFile_ForeignIncarnationSlotIsNotUsed(t *testing.T) {
	// Row 15: a slot from the other incarnation is rejected even when it
	// is newer; the expected incarnation's slot wins.
	ours := AheadRecord{Sequence: 1, Incarnation: testID, Frontier: 3}
	theirs := AheadRecord{Sequence: 99, Incarnation: "aaaaaaaaaaaaaaaa", Frontier: 1000}
	got, err := DecodeAheadFile(aheadFile(encodeSlot(t, ours), encodeSlot(t, theirs)), testID)
	if err != nil || got.Slot != 0 {
		t.Fatalf("got %+v, %v", got, err)
	}
	wantErr(t, got.Rejected[1], ErrForeignIncarnation)
	assertAheadRecord(t, got.Record, ours)

	_, err = DecodeAheadFile(aheadFile(encodeSlot(t, theirs), encodeSlot(t, theirs)), testID)
	wantErr(t, err, ErrCorrupt)
	wantErr(t, err, ErrForeignIncarnation)

	// A slot written without an id matches only the empty expected id.
	noID := AheadRecord{Sequence: 1, Frontier: 3}
	_, err = DecodeAheadFile(aheadFile(encodeSlot(t, noID), nil), testID)
	wantErr(t, err, ErrForeignIncarnation)
	if got, err := DecodeAheadFile(aheadFile(encodeSlot(t, noID), nil), ""); err != nil || got.Slot != 0 {
		t.Fatalf("no-id slot with no expected id: %+v, %v", got, err)
	}
}

func TestDecodeAheadFile_BothBadIsCorrupt(t *testing.T) {
	// Row 15: both slots bad: the caller falls back to consumer.offset.
	for _, file := range [][]byte{
		make([]byte, AheadFileSize),
		aheadFile(encodeSlot(t, AheadRecord{Sequence: 1})[:100], nil),
	} {
		got, err := DecodeAheadFile(file, "")
		wantErr(t, err, ErrCorrupt)
		if got.Present {
			t.Fatal("present with an error")
		}
	}
}

func TestDecodeAheadFile_Lengths(t *testing.T) {
	rec := AheadRecord{Sequence: 3, Incarnation: testID, Frontier: 8}
	slot := encodeSlot(t, rec)

	// Empty: no record was ever written.
	got, err := DecodeAheadFile(nil, testID)
	if err != nil || got.Present {
		t.Fatalf("empty file: %+v, %v", got, err)
	}
	// One slot: a crash before slot 1 was first written. Slot 1 is absent,
	// not rejected.
	got, err = DecodeAheadFile(slot, testID)
	if err != nil || !got.Present || got.Slot != 0 || got.Rejected != [2]error{} {
		t.Fatalf("one-slot file: %+v, %v", got, err)
	}
	// One slot and a torn second one.
	got, err = DecodeAheadFile(append(bytes.Clone(slot), make([]byte, 100)...), testID)
	if err != nil || got.Slot != 0 {
		t.Fatalf("torn second slot: %+v, %v", got, err)
	}
	wantErr(t, got.Rejected[1], ErrTruncated)
	// Shorter than a slot: slot 0 torn, nothing usable.
	_, err = DecodeAheadFile(slot[:AheadSlotSize-1], testID)
	wantErr(t, err, ErrCorrupt)
	wantErr(t, err, ErrTruncated)
	// Longer than two slots.
	_, err = DecodeAheadFile(append(aheadFile(slot, slot), 0), testID)
	wantErr(t, err, ErrCorrupt)
	// An invalid expected id is the caller's bug.
	_, err = DecodeAheadFile(aheadFile(slot, slot), "XYZ")
	wantErr(t, err, ErrInvalidInput)
}

func TestDecodeAheadFile_TieTakesLowerFrontier(t *testing.T) {
	// Equal sequences never come from a correct writer; if they do, recovery
	// takes the record that promises less, so it never passes an unacked offset.
	low := AheadRecord{Sequence: 7, Incarnation: testID, Frontier: 10}
	high := AheadRecord{Sequence: 7, Incarnation: testID, Frontier: 20}
	for _, file := range [][]byte{aheadFile(encodeSlot(t, low), encodeSlot(t, high)), aheadFile(encodeSlot(t, high), encodeSlot(t, low))} {
		got, err := DecodeAheadFile(file, testID)
		if err != nil {
			t.Fatal(err)
		}
		assertAheadRecord(t, got.Record, low)
	}
}

func FuzzDecodeAheadSlot(f *testing.F) {
	f.Add(encodeSlot(f, AheadRecord{}), false)
	f.Add(encodeSlot(f, AheadRecord{Sequence: 2, Incarnation: testID, Frontier: 100, Ahead: []int64{102, 300, 1 << 50}}), false)
	f.Add(encodeSlot(f, AheadRecord{Sequence: 2, Frontier: 0, Ahead: []int64{1}, Truncated: true}), true)
	f.Add([]byte("NRCA\x01\x00\x00\x00"), true)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		if reseal {
			// Force the magic and a good CRC so the fuzzer explores the
			// checks behind them.
			fixed := make([]byte, AheadSlotSize)
			copy(fixed, b)
			copy(fixed, AheadMagic)
			b = resealSlot(fixed)
		}
		rec, err := DecodeAheadSlot(b)
		if err != nil {
			if !errorIsAny(err, ErrCorrupt, ErrTruncated) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		var again [AheadSlotSize]byte
		stored, err := EncodeAheadSlot(&again, rec)
		if err != nil || stored != len(rec.Ahead) {
			t.Fatalf("re-encoding a valid slot: stored %d of %d, %v", stored, len(rec.Ahead), err)
		}
		if !bytes.Equal(again[:], b) {
			t.Fatalf("re-encoded slot differs from the input")
		}
		back, err := DecodeAheadSlot(again[:])
		if err != nil || !aheadEqual(back, rec) {
			t.Fatalf("decode(encode(decode(x))) = %+v, %v; want %+v", back, err, rec)
		}
	})
}

func FuzzDecodeAheadFile(f *testing.F) {
	a := encodeSlot(f, AheadRecord{Sequence: 5, Incarnation: testID, Frontier: 10, Ahead: []int64{12}})
	b := encodeSlot(f, AheadRecord{Sequence: 6, Incarnation: testID, Frontier: 13})
	f.Add(aheadFile(a, b))
	f.Add(aheadFile(b, a))
	f.Add(bytes.Clone(a))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, file []byte) {
		got, err := DecodeAheadFile(file, testID)
		if err != nil {
			wantErr(t, err, ErrCorrupt)
			return
		}
		if !got.Present {
			if len(file) != 0 {
				t.Fatalf("%d bytes read as absent", len(file))
			}
			return
		}
		start := int(AheadSlotOffset(got.Slot))
		winner, err := DecodeAheadSlot(file[start : start+AheadSlotSize])
		if err != nil || !aheadEqual(winner, got.Record) || winner.Incarnation != testID {
			t.Fatalf("winning slot %d does not decode to the record: %v", got.Slot, err)
		}
		other := 1 - got.Slot
		if o := int(AheadSlotOffset(other)); o+AheadSlotSize <= len(file) && got.Rejected[other] == nil {
			loser, err := DecodeAheadSlot(file[o : o+AheadSlotSize])
			if err != nil || newerAhead(loser, winner) {
				t.Fatalf("slot %d should have won: %+v, %v", other, loser, err)
			}
		}
	})
}

func FuzzAheadSlotRoundTrip(f *testing.F) {
	f.Add(uint64(1), int64(0), []byte{0, 1, 2, 200, 255})
	f.Add(uint64(math.MaxUint64), int64(math.MaxInt64-300), []byte{1})
	f.Fuzz(func(t *testing.T, sequence uint64, frontier int64, gaps []byte) {
		if frontier < 0 {
			frontier = -(frontier + 1)
		}
		rec := AheadRecord{Sequence: sequence, Incarnation: testID, Frontier: frontier}
		previous := frontier
		for i, g := range gaps {
			gap := int64(g)
			if i%7 == 6 {
				gap <<= 30 // some wide gaps, so sets overflow the slot
			}
			if previous > math.MaxInt64-1-gap {
				break
			}
			previous += 1 + gap
			rec.Ahead = append(rec.Ahead, previous)
		}
		var slot [AheadSlotSize]byte
		stored, err := EncodeAheadSlot(&slot, rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeAheadSlot(slot[:])
		if err != nil {
			t.Fatal(err)
		}
		want := rec
		want.Ahead = rec.Ahead[:stored]
		want.Truncated = stored < len(rec.Ahead)
		if len(want.Ahead) == 0 {
			want.Ahead = nil
		}
		assertAheadRecord(t, got, want)
	})
}
