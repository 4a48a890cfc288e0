package partition

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/narad-io/storage/wire"
)

// TestFrameEnvelopes_ServesAWholeFrameOrNone: frameEnvelopes walks a
// frame's records in one pass, and a payload whose structure or any one
// envelope is wrong (a length past the end, fewer or more records than
// the header says, bytes left over, a bad envelope in the middle) is
// ErrCorrupt with no record returned; a good one gives every record, in
// order, at its offset.
func TestFrameEnvelopes_ServesAWholeFrameOrNone(t *testing.T) {
	var good []byte
	for i := range 3 {
		var err error
		if good, _, err = wire.AppendEnvelopeRecord(good, []byte{byte('a' + i)}, int64(100+i), bytes.Repeat([]byte{byte(i)}, 10*i)); err != nil {
			t.Fatal(err)
		}
	}
	header := func(count int, payload []byte) wire.FrameHeader {
		return wire.FrameHeader{BaseOffset: 40, RecordCount: int32(count), UncompressedSize: uint32(len(payload)), StoredSize: uint32(len(payload))}
	}
	got, err := frameEnvelopes(header(3, good), good, nil)
	if err != nil || len(got) != 3 {
		t.Fatalf("a good payload: %d records, %v", len(got), err)
	}
	for i, r := range got {
		if r.Offset != int64(40+i) || r.CommittedAtUnixMs != int64(100+i) || string(r.Key) != string(rune('a'+i)) || !bytes.Equal(r.Value, bytes.Repeat([]byte{byte(i)}, 10*i)) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}

	badEnvelope := bytes.Clone(good)
	second := wire.RecordLenSize + wire.EnvelopeSize(len(got[0].Key), len(got[0].Value)) + wire.RecordLenSize // the second envelope's version byte
	if badEnvelope[second] != wire.EnvelopeVersion {
		t.Fatalf("byte %d is 0x%02x, not an envelope's version", second, badEnvelope[second])
	}
	badEnvelope[second] = 0x7f
	pastEnd := bytes.Clone(good)
	pastEnd[0] = 0xff // the first length runs past the payload
	for name, c := range map[string]struct {
		count   int
		payload []byte
	}{
		"a bad envelope in the middle":   {3, badEnvelope},
		"a length past the end":          {3, pastEnd},
		"more records than there are":    {4, good},
		"fewer records than there are":   {2, good},
		"bytes after the last record":    {3, append(bytes.Clone(good), 0)},
		"more records than 4-byte slots": {len(good), good},
	} {
		into := make([]ReadRecord, 0, 8)
		got, err := frameEnvelopes(header(c.count, c.payload), c.payload, into)
		if !errors.Is(err, wire.ErrCorrupt) || got != nil {
			t.Errorf("%s: %d records, %v; want none and ErrCorrupt", name, len(got), err)
		}
	}
}

// TestFrameEnvelopes_ACorruptCountDrivesNoAllocation: a CRC-valid frame
// whose record count is as many as its bytes could frame (4 each) but
// whose records are not envelopes gets room only for the records its
// bytes could hold (14 bytes each at least), not the count: found by
// review, when the room was grown to the count before any record was
// checked (16 bytes of records a payload byte).
func TestFrameEnvelopes_ACorruptCountDrivesNoAllocation(t *testing.T) {
	payload := make([]byte, 1<<20)
	h := wire.FrameHeader{BaseOffset: 0, RecordCount: int32(len(payload) / wire.RecordLenSize), UncompressedSize: uint32(len(payload)), StoredSize: uint32(len(payload))}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := frameEnvelopes(h, payload, nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, wire.ErrCorrupt) || got != nil {
		t.Fatalf("%d records, %v; want none and ErrCorrupt", len(got), err)
	}
	room := uint64(len(payload)/(wire.RecordLenSize+wire.EnvelopeSize(0, 0))) * uint64(unsafe.Sizeof(ReadRecord{}))
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > room+room/4 {
		t.Fatalf("a corrupt count of %d in %d bytes allocated %d bytes; the bytes hold at most %d bytes of records", h.RecordCount, len(payload), allocated, room)
	}
	for _, count := range []int32{0, -1} {
		h.RecordCount = count
		if got, err := frameEnvelopes(h, payload, nil); !errors.Is(err, wire.ErrCorrupt) || got != nil {
			t.Errorf("record count %d: %d records, %v; want none and ErrCorrupt", count, len(got), err)
		}
	}
}

// TestDecodeFrame_ACorruptCountDrivesNoAllocation: decodeFrame leaves the
// room to frameEnvelopes, so a corrupt count in a compressed frame
// allocates no more than the bound above either (it made room for the
// count before).
func TestDecodeFrame_ACorruptCountDrivesNoAllocation(t *testing.T) {
	payload := make([]byte, 1<<20)
	h := wire.FrameHeader{BaseOffset: 0, RecordCount: int32(len(payload) / wire.RecordLenSize), UncompressedSize: uint32(len(payload)), StoredSize: uint32(len(payload))}
	frame := append(make([]byte, wire.FrameHeaderSize), payload...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f, err := decodeFrame(nil, h, frame)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, wire.ErrCorrupt) || f != nil {
		t.Fatalf("%v, %v; want no frame and ErrCorrupt", f, err)
	}
	room := uint64(len(payload)/(wire.RecordLenSize+wire.EnvelopeSize(0, 0))) * uint64(unsafe.Sizeof(ReadRecord{}))
	decoded := uint64(len(payload)) // codec none decodes into a private copy
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > decoded+room+room/4 {
		t.Fatalf("a corrupt count of %d in %d bytes allocated %d bytes; want at most the copy and %d bytes of records", h.RecordCount, len(payload), allocated, room)
	}
}
