package wire

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"slices"
	"testing"
)

func ackedRecordsEqual(a, b AckedRecord) bool {
	return a.Sequence == b.Sequence && a.Incarnation == b.Incarnation && a.Frontier == b.Frontier && slices.Equal(a.Ahead, b.Ahead)
}

// TestAckedFile_RoundTripsAWholeSet: a set far larger than a
// consumer.ahead slot holds, and an empty one, come back exactly.
func TestAckedFile_RoundTripsAWholeSet(t *testing.T) {
	big := AckedRecord{Sequence: 9, Incarnation: testID, Frontier: 7}
	for o := int64(9); len(big.Ahead) < AckedMaxOffsets; o += 2 {
		big.Ahead = append(big.Ahead, o)
	}
	big.Ahead[len(big.Ahead)-1] = math.MaxInt64
	for _, rec := range []AckedRecord{big, {Sequence: 1, Frontier: 0}} {
		b, err := EncodeAckedFile(rec)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > AckedMaxFileSize {
			t.Fatalf("%d bytes, over AckedMaxFileSize %d", len(b), AckedMaxFileSize)
		}
		got, err := DecodeAckedFile(b)
		if err != nil || !ackedRecordsEqual(got, rec) {
			t.Fatalf("decode(encode(%d offsets)) = %d offsets, %v", len(rec.Ahead), len(got.Ahead), err)
		}
	}
}

func TestAckedFile_EncodeRefusesWhatBreaksTheInvariants(t *testing.T) {
	for _, rec := range []AckedRecord{
		{Frontier: -1},
		{Frontier: 5, Ahead: []int64{5}},
		{Frontier: 5, Ahead: []int64{7, 7}},
		{Frontier: 0, Ahead: make([]int64, AckedMaxOffsets+1)},
		{Incarnation: "not hex"},
	} {
		_, err := EncodeAckedFile(rec)
		wantErr(t, err, ErrInvalidInput)
	}
}

// TestDecodeAckedFile_RejectsDamage: every byte flipped, every length cut,
// and the checks behind a good checksum are ErrCorrupt, never a record.
func TestDecodeAckedFile_RejectsDamage(t *testing.T) {
	good, err := EncodeAckedFile(AckedRecord{Sequence: 3, Incarnation: testID, Frontier: 10, Ahead: []int64{12, 300, 70000}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		_, err := DecodeAckedFile(b)
		wantErr(t, err, ErrCorrupt)
	}
	for n := range len(good) {
		_, err := DecodeAckedFile(good[:n])
		wantErr(t, err, ErrCorrupt)
	}
	reseal := func(edit func(b []byte)) []byte {
		b := bytes.Clone(good)
		edit(b)
		binary.BigEndian.PutUint32(b[len(b)-4:], crc32c(b[:len(b)-4]))
		return b
	}
	for name, b := range map[string][]byte{
		"version":     reseal(func(b []byte) { b[ackedVersionAt] = 2 }),
		"reserved":    reseal(func(b []byte) { b[ackedReservedAt+1] = 1 }),
		"frontier":    reseal(func(b []byte) { b[ackedFrontierAt] = 0x80 }),
		"count":       reseal(func(b []byte) { binary.BigEndian.PutUint32(b[ackedCountAt:], 2) }),
		"count bound": reseal(func(b []byte) { binary.BigEndian.PutUint32(b[ackedCountAt:], AckedMaxOffsets+1) }),
		"list length": reseal(func(b []byte) { binary.BigEndian.PutUint32(b[ackedListLenAt:], 3) }),
		"non-minimal": reseal(func(b []byte) { b[ackedListAt] = 0x81; b[ackedListAt+1] = 0x00 }),
	} {
		if _, err := DecodeAckedFile(b); err == nil {
			t.Errorf("%s: decoded", name)
		} else {
			wantErr(t, err, ErrCorrupt)
		}
	}
}

func FuzzDecodeAckedFile(f *testing.F) {
	for _, rec := range []AckedRecord{
		{Sequence: 1},
		{Sequence: 2, Incarnation: testID, Frontier: 100, Ahead: []int64{102, 300, 1 << 50}},
	} {
		b, err := EncodeAckedFile(rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Add([]byte("NRCK\x01"), true)
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		if reseal && len(b) >= ackedListAt+4 {
			// The magic and a good checksum, so the fuzzer reaches the
			// checks behind them.
			b = bytes.Clone(b)
			copy(b, AckedMagic)
			binary.BigEndian.PutUint32(b[len(b)-4:], crc32c(b[:len(b)-4]))
		}
		rec, err := DecodeAckedFile(b)
		if err != nil {
			wantErr(t, err, ErrCorrupt)
			return
		}
		again, err := EncodeAckedFile(rec)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding a valid file: %v, equal %v", err, bytes.Equal(again, b))
		}
	})
}

// TestLeaseFloor_RoundTripsAndRejectsDamage: the floor comes back; an
// empty file holds none; every flipped byte and every other length is
// ErrCorrupt; a floor over MaxLeaseID is refused both ways.
func TestLeaseFloor_RoundTripsAndRejectsDamage(t *testing.T) {
	for _, v := range []uint64{0, 1 << 20, MaxLeaseID} {
		b, err := EncodeLeaseFloor(v)
		if err != nil {
			t.Fatal(err)
		}
		got, present, err := DecodeLeaseFloor(b[:])
		if err != nil || !present || got != v {
			t.Fatalf("DecodeLeaseFloor(EncodeLeaseFloor(%d)) = %d, %v, %v", v, got, present, err)
		}
	}
	if _, present, err := DecodeLeaseFloor(nil); present || err != nil {
		t.Fatalf("empty file: %v, %v", present, err)
	}
	_, err := EncodeLeaseFloor(MaxLeaseID + 1)
	wantErr(t, err, ErrInvalidInput)
	good, _ := EncodeLeaseFloor(12345)
	for i := range good {
		b := good
		b[i] ^= 0x01
		_, _, err := DecodeLeaseFloor(b[:])
		wantErr(t, err, ErrCorrupt)
	}
	for n := 1; n < len(good); n++ {
		_, _, err := DecodeLeaseFloor(good[:n])
		wantErr(t, err, ErrCorrupt)
	}
	over := good
	binary.BigEndian.PutUint64(over[leaseFloorValueAt:], MaxLeaseID+1)
	binary.BigEndian.PutUint32(over[leaseFloorCRCAt:], crc32c(over[:leaseFloorCRCAt]))
	_, _, err = DecodeLeaseFloor(over[:])
	wantErr(t, err, ErrCorrupt)
}

func FuzzDecodeLeaseFloor(f *testing.F) {
	good, _ := EncodeLeaseFloor(77)
	f.Add(good[:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, present, err := DecodeLeaseFloor(b)
		switch {
		case err != nil:
			wantErr(t, err, ErrCorrupt)
		case !present:
			if len(b) != 0 {
				t.Fatalf("%d bytes read as absent", len(b))
			}
		default:
			again, err := EncodeLeaseFloor(v)
			if err != nil || !bytes.Equal(again[:], b) {
				t.Fatalf("re-encoding floor %d: %v", v, err)
			}
		}
	})
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
