package wire

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// testFrame builds a valid codec-none frame of count records of recordLen
// bytes each at base.
func testFrame(t testing.TB, base int64, count, recordLen int) []byte {
	t.Helper()
	var payload []byte
	for i := range count {
		record := bytes.Repeat([]byte{byte('a' + i%26)}, recordLen)
		var err error
		if payload, err = AppendRecordFrame(payload, record); err != nil {
			t.Fatal(err)
		}
	}
	frame, err := AppendFrame(nil, CodecNone, base, count, len(payload), payload)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

// rawHeader lays out a header from its fields, with no validation: the
// decoder tests build impossible headers with it.
func rawHeader(magic uint16, flags byte, count uint32, base uint64, uncompressed, stored, crc uint32) []byte {
	b := make([]byte, FrameHeaderSize)
	binary.BigEndian.PutUint16(b[0:], magic)
	b[2] = flags
	binary.BigEndian.PutUint32(b[3:], count)
	binary.BigEndian.PutUint64(b[7:], base)
	binary.BigEndian.PutUint32(b[15:], uncompressed)
	binary.BigEndian.PutUint32(b[19:], stored)
	binary.BigEndian.PutUint32(b[23:], crc)
	return b
}

func encodeHeader(h FrameHeader) []byte {
	return rawHeader(FrameMagic, h.Codec, uint32(h.RecordCount), uint64(h.BaseOffset), h.UncompressedSize, h.StoredSize, h.CRC)
}

func TestFrameHeader_LayoutOffsets(t *testing.T) {
	// Design "Frame format": magic@0, flags@2, recordCount@3, baseOffset@7,
	// uncompressed@15, compressed@19, crc32c@23, payload@27.
	frame := testFrame(t, 0x0102030405060708, 3, 5)
	h, err := CheckFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"magic@0", uint64(binary.BigEndian.Uint16(frame[0:])), 0xCAFE},
		{"flags@2", uint64(frame[2]), CodecNone},
		{"recordCount@3", uint64(binary.BigEndian.Uint32(frame[3:])), 3},
		{"baseOffset@7", binary.BigEndian.Uint64(frame[7:]), 0x0102030405060708},
		{"uncompressed@15", uint64(binary.BigEndian.Uint32(frame[15:])), 27},
		{"compressed@19", uint64(binary.BigEndian.Uint32(frame[19:])), 27},
		{"crc@23", uint64(binary.BigEndian.Uint32(frame[23:])), uint64(crc32cBitwise(frame[2:23], frame[27:]))},
		{"FrameLen", uint64(h.FrameLen()), uint64(len(frame))},
		{"EndOffset", uint64(h.EndOffset()), 0x0102030405060708 + 3},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = 0x%x, want 0x%x", c.name, c.got, c.want)
		}
	}
}

func TestFrameHeader_CRCLeavesOutMagic(t *testing.T) {
	// Design: "The CRC leaves out the magic, so the recovery scanner can
	// search for 0xCAFE cheaply": the CRC is over header[2:23]+payload only.
	frame := testFrame(t, 10, 2, 8)
	other := bytes.Clone(frame)
	other[0], other[1] = 0x12, 0x34
	if frameCRC(frame[:FrameHeaderSize], frame[FrameHeaderSize:]) != frameCRC(other[:FrameHeaderSize], other[FrameHeaderSize:]) {
		t.Fatal("changing the magic changed the CRC")
	}
	// Every other header byte before the CRC is covered.
	for i := 2; i < 23; i++ {
		flipped := bytes.Clone(frame)
		flipped[i] ^= 0x01
		if frameCRC(flipped[:FrameHeaderSize], flipped[FrameHeaderSize:]) == binary.BigEndian.Uint32(frame[23:]) {
			t.Errorf("flipping header byte %d left the CRC unchanged", i)
		}
	}
}

func TestParseFrameHeader_NeedsOnlyTheHeader(t *testing.T) {
	// R6: callers bound the payload read by the bytes left in the file, so
	// the header must parse from its 27 bytes alone.
	frame := testFrame(t, 7, 4, 100)
	h, err := ParseFrameHeader(frame[:FrameHeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	if h.FrameLen() != int64(len(frame)) || h.BaseOffset != 7 || h.RecordCount != 4 {
		t.Fatalf("header %+v", h)
	}
}

func TestParseFrameHeader_Rejects(t *testing.T) {
	const max = MaxFrameBytes
	good := func() []byte { return rawHeader(FrameMagic, CodecNone, 2, 100, 16, 16, 0) }
	cases := []struct {
		name   string
		header []byte
		want   error
	}{
		{"empty buffer is torn", nil, ErrTruncated},
		{"one byte is torn", []byte{0xCA}, ErrTruncated},
		{"26 bytes is torn", good()[:26], ErrTruncated},
		{"zero header (zero-filled sector, row 5)", make([]byte, FrameHeaderSize), ErrCorrupt},
		{"bad magic", rawHeader(0xCAFF, CodecNone, 2, 100, 16, 16, 0), ErrCorrupt},
		{"byte-swapped magic", rawHeader(0xFECA, CodecNone, 2, 100, 16, 16, 0), ErrCorrupt},
		{"flag bit 3 set", rawHeader(FrameMagic, 0x08, 2, 100, 16, 16, 0), ErrCorrupt},
		{"flag bit 7 set", rawHeader(FrameMagic, 0x80, 2, 100, 16, 16, 0), ErrCorrupt},
		{"flags all ones", rawHeader(FrameMagic, 0xFF, 2, 100, 16, 16, 0), ErrCorrupt},
		{"record count zero", rawHeader(FrameMagic, CodecNone, 0, 100, 16, 16, 0), ErrCorrupt},
		{"record count negative", rawHeader(FrameMagic, CodecNone, 0x80000000, 100, 16, 16, 0), ErrCorrupt},
		{"record count 0x7FFFFFFF (row 11)", rawHeader(FrameMagic, CodecNone, 0x7FFFFFFF, 100, 16, 16, 0), ErrCorrupt},
		{"negative base offset", rawHeader(FrameMagic, CodecNone, 2, 1<<63, 16, 16, 0), ErrCorrupt},
		{"base plus count overflows", rawHeader(FrameMagic, CodecNone, 2, math.MaxInt64-1, 16, 16, 0), ErrCorrupt},
		{"uncompressed 0xFFFFFFF0 (row 11)", rawHeader(FrameMagic, CodecZstd, 2, 100, 0xFFFFFFF0, 16, 0), ErrCorrupt},
		{"uncompressed one over the bound", rawHeader(FrameMagic, CodecZstd, 2, 100, max+1, 16, 0), ErrCorrupt},
		{"compressed 0xFFFFFFF0 (row 11)", rawHeader(FrameMagic, CodecZstd, 2, 100, 16, 0xFFFFFFF0, 0), ErrCorrupt},
		{"frame one byte over the bound", rawHeader(FrameMagic, CodecZstd, 2, 100, 16, max-FrameHeaderSize+1, 0), ErrCorrupt},
		{"empty stored payload", rawHeader(FrameMagic, CodecZstd, 1, 100, 16, 0, 0), ErrCorrupt},
		{"more records than 4-byte prefixes fit (R6)", rawHeader(FrameMagic, CodecNone, 5, 100, 16, 16, 0), ErrCorrupt},
		{"codec none, uncompressed < compressed (R6)", rawHeader(FrameMagic, CodecNone, 2, 100, 16, 17, 0), ErrCorrupt},
		{"codec none, uncompressed > compressed", rawHeader(FrameMagic, CodecNone, 2, 100, 17, 16, 0), ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := ParseFrameHeader(c.header)
			wantErr(t, err, c.want)
			if h != (FrameHeader{}) {
				t.Fatalf("header %+v returned with an error", h)
			}
		})
	}
}

func TestParseFrameHeader_AcceptsBounds(t *testing.T) {
	const max = MaxFrameBytes
	cases := []struct {
		name   string
		header []byte
	}{
		{"frame exactly MaxFrameBytes", rawHeader(FrameMagic, CodecNone, 1, 0, max-FrameHeaderSize, max-FrameHeaderSize, 0)},
		{"uncompressed exactly MaxFrameBytes", rawHeader(FrameMagic, CodecZstd, 1, 0, max, 100, 0)},
		{"one record per 4 bytes", rawHeader(FrameMagic, CodecNone, 4, 0, 16, 16, 0)},
		{"last offset is MaxInt64-1", rawHeader(FrameMagic, CodecNone, 1, math.MaxInt64-1, 4, 4, 0)},
		{"codec id 7 (interpreting it is the codec's job)", rawHeader(FrameMagic, 7, 1, 0, 4, 9, 0)},
		{"zstd stored larger than uncompressed", rawHeader(FrameMagic, CodecZstd, 1, 0, 4, 20, 0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseFrameHeader(c.header); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCheckFrame_TornAtEveryLength(t *testing.T) {
	// Row 2: a frame cut at any point is a torn frame, never valid, never a
	// panic, and (once the header is whole) never called corrupt.
	frame := testFrame(t, 1000, 3, 10)
	for n := range len(frame) {
		_, err := CheckFrame(frame[:n])
		wantErr(t, err, ErrTruncated)
	}
	if _, err := CheckFrame(frame); err != nil {
		t.Fatal(err)
	}
}

func TestCheckFrame_EveryBitFlipIsCorrupt(t *testing.T) {
	// Row 6: a bit flip anywhere in a frame is caught by the header checks
	// or by the CRC.
	frame := testFrame(t, 1000, 3, 10)
	for i := range len(frame) * 8 {
		flipped := bytes.Clone(frame)
		flipped[i/8] ^= 1 << (i % 8)
		_, err := CheckFrame(flipped)
		if err == nil {
			t.Fatalf("flip of bit %d in byte %d went unnoticed", i%8, i/8)
		}
		if !errorIsAny(err, ErrCorrupt, ErrTruncated) {
			t.Fatalf("flip of bit %d in byte %d: %v", i%8, i/8, err)
		}
	}
}

func TestCheckFrame_ZeroFilledTailIsCorrupt(t *testing.T) {
	// Row 5: the size reached the disk, the data did not.
	frame := testFrame(t, 1000, 20, 40)
	for _, from := range []int{FrameHeaderSize, len(frame) - 512, len(frame) - 1, 0} {
		zeroed := bytes.Clone(frame)
		clear(zeroed[from:])
		_, err := CheckFrame(zeroed)
		wantErr(t, err, ErrCorrupt)
	}
}

func TestCheckFrame_IgnoresBytesAfterTheFrame(t *testing.T) {
	frame := testFrame(t, 5, 1, 3)
	h, err := CheckFrame(append(bytes.Clone(frame), 0xCA, 0xFE, 0xFF))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Stored(frame), frame[FrameHeaderSize:]) {
		t.Fatal("Stored does not return the payload")
	}
}

func TestCheckFrame_MisplacedFrameStillChecksOut(t *testing.T) {
	// R5 is the caller's job: wire validates a frame on its own and reports
	// its base offset, which the caller compares with the segment name or
	// the previous frame's end.
	frame := testFrame(t, 450832, 2, 4)
	h, err := CheckFrame(frame)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 450832 || h.EndOffset() != 450834 {
		t.Fatalf("header %+v", h)
	}
}

func TestAppendFrame_Rejects(t *testing.T) {
	stored := make([]byte, 16)
	cases := []struct {
		name         string
		codec        uint8
		base         int64
		count        int
		uncompressed int
		stored       []byte
		want         error
	}{
		{"codec 8 does not fit the flags", 8, 0, 1, 16, stored, ErrInvalidInput},
		{"negative base offset", CodecNone, -1, 1, 16, stored, ErrInvalidInput},
		{"zero records", CodecNone, 0, 0, 16, stored, ErrInvalidInput},
		{"negative record count", CodecNone, 0, -1, 16, stored, ErrInvalidInput},
		{"record count over int32", CodecNone, 0, math.MaxInt32 + 1, 16, stored, ErrTooLarge},
		{"base plus count overflows", CodecNone, math.MaxInt64, 1, 16, stored, ErrInvalidInput},
		{"negative uncompressed size", CodecZstd, 0, 1, -1, stored, ErrInvalidInput},
		{"uncompressed over the bound", CodecZstd, 0, 1, MaxFrameBytes + 1, stored, ErrTooLarge},
		{"empty stored payload", CodecZstd, 0, 1, 16, nil, ErrInvalidInput},
		{"more records than prefixes fit", CodecNone, 0, 5, 16, stored, ErrInvalidInput},
		{"codec none with sizes differing", CodecNone, 0, 1, 20, stored, ErrInvalidInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := []byte("prefix")
			got, err := AppendFrame(dst, c.codec, c.base, c.count, c.uncompressed, c.stored)
			wantErr(t, err, c.want)
			if string(got) != "prefix" {
				t.Fatalf("dst changed to %q on error", got)
			}
		})
	}
}

func TestAppendFrame_StoredOverBoundIsTooLarge(t *testing.T) {
	// The bound is on header + stored payload. A fresh large allocation is
	// never touched by the encoder, which refuses it on its length.
	stored := make([]byte, MaxFrameBytes-FrameHeaderSize+1)
	_, err := AppendFrame(nil, CodecZstd, 0, 1, 16, stored)
	wantErr(t, err, ErrTooLarge)
	// Exactly at the bound: the same check, by the header validation alone.
	if _, err := newFrameHeader(CodecNone, 0, 1, MaxFrameBytes-FrameHeaderSize, MaxFrameBytes-FrameHeaderSize); err != nil {
		t.Fatal(err)
	}
}

func TestAppendFrame_AppendsAfterExistingBytes(t *testing.T) {
	first := testFrame(t, 0, 2, 3)
	second := testFrame(t, 2, 1, 9)
	payload := second[FrameHeaderSize:]
	both, err := AppendFrame(bytes.Clone(first), CodecNone, 2, 1, len(payload), payload)
	if err != nil {
		t.Fatal(err)
	}
	h1, err := CheckFrame(both)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := CheckFrame(both[h1.FrameLen():])
	if err != nil {
		t.Fatal(err)
	}
	if h2.BaseOffset != h1.EndOffset() || !bytes.Equal(both[h1.FrameLen():], second) {
		t.Fatalf("second frame %+v after %+v", h2, h1)
	}
}

func TestPutFrameHeader_MatchesAppendFrame(t *testing.T) {
	stored := []byte("compressed bytes of a zstd payload")
	want, err := AppendFrame(nil, CodecZstd, 77, 3, 300, stored)
	if err != nil {
		t.Fatal(err)
	}
	frame := append(make([]byte, FrameHeaderSize), stored...)
	h, err := PutFrameHeader(frame, CodecZstd, 77, 3, 300)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(frame, want) {
		t.Fatalf("PutFrameHeader wrote %x, AppendFrame %x", frame, want)
	}
	if checked, err := CheckFrame(frame); err != nil || checked != h {
		t.Fatalf("CheckFrame = %+v, %v; PutFrameHeader returned %+v", checked, err, h)
	}
	untouched := make([]byte, FrameHeaderSize+4)
	if _, err := PutFrameHeader(untouched, CodecNone, -5, 1, 4); err == nil || !bytes.Equal(untouched, make([]byte, FrameHeaderSize+4)) {
		t.Fatalf("PutFrameHeader with a bad offset: err %v, buffer %x", err, untouched)
	}
	_, err = PutFrameHeader(make([]byte, 26), CodecNone, 0, 1, 4)
	wantErr(t, err, ErrInvalidInput)
}

func TestFrameDecoders_DoNotAllocate(t *testing.T) {
	// R6 / I10: decoding a header or checking a frame allocates nothing, so
	// no length field can drive an allocation inside this package.
	frame := testFrame(t, 9, 10, 30)
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseFrameHeader(frame) }); n != 0 {
		t.Errorf("ParseFrameHeader allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = CheckFrame(frame) }); n != 0 {
		t.Errorf("CheckFrame allocates %v times", n)
	}
}

func FuzzParseFrameHeader(f *testing.F) {
	f.Add(testFrame(f, 0, 1, 0)[:FrameHeaderSize])
	f.Add(testFrame(f, 450832, 3, 17)[:FrameHeaderSize])
	f.Add(rawHeader(FrameMagic, CodecZstd, 1, 0, MaxFrameBytes, 100, 0))
	f.Add(rawHeader(FrameMagic, CodecNone, 0x7FFFFFFF, 0, 0xFFFFFFF0, 0xFFFFFFF0, 0))
	f.Add([]byte{0xCA, 0xFE})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= FrameHeaderSize {
			plausibleAgrees(t, rawFields(b))
		}
		h, err := ParseFrameHeader(b)
		if err != nil {
			if !errorIsAny(err, ErrCorrupt, ErrTruncated) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if p, _ := headerProblem(h); p != "" {
			t.Fatalf("accepted header breaks an invariant: %s", p)
		}
		if h.FrameLen() > MaxFrameBytes || h.UncompressedSize > MaxFrameBytes {
			t.Fatalf("accepted header past the bound: %+v", h)
		}
		if got := encodeHeader(h); !bytes.Equal(got, b[:FrameHeaderSize]) {
			t.Fatalf("re-encoded header %x, input %x", got, b[:FrameHeaderSize])
		}
	})
}

// TestFrameHeader_PlausibleIsHeaderProblemsVerdict: the read path's
// cheap check accepts exactly the headers headerProblem finds nothing
// wrong with, at each bound and one past it.
func TestFrameHeader_PlausibleIsHeaderProblemsVerdict(t *testing.T) {
	good := FrameHeader{Codec: CodecZstd, RecordCount: 3, BaseOffset: 10, UncompressedSize: 40, StoredSize: 20}
	cases := []FrameHeader{good}
	for _, edit := range []func(*FrameHeader){
		func(h *FrameHeader) { h.Codec = MaxCodecID },
		func(h *FrameHeader) { h.Codec = MaxCodecID + 1 },
		func(h *FrameHeader) { h.RecordCount = 0 },
		func(h *FrameHeader) { h.RecordCount = -1 },
		func(h *FrameHeader) { h.RecordCount = 10 },
		func(h *FrameHeader) { h.RecordCount = 11 },
		func(h *FrameHeader) { h.BaseOffset = -1 },
		func(h *FrameHeader) { h.BaseOffset = math.MaxInt64 - 3 },
		func(h *FrameHeader) { h.BaseOffset = math.MaxInt64 - 2 },
		func(h *FrameHeader) { h.UncompressedSize = MaxFrameBytes },
		func(h *FrameHeader) { h.UncompressedSize = MaxFrameBytes + 1 },
		func(h *FrameHeader) { h.StoredSize = 0 },
		func(h *FrameHeader) { h.StoredSize = MaxFrameBytes - FrameHeaderSize },
		func(h *FrameHeader) { h.StoredSize = MaxFrameBytes - FrameHeaderSize + 1 },
		func(h *FrameHeader) { h.StoredSize = math.MaxUint32 },
		func(h *FrameHeader) { h.Codec = CodecNone },
		func(h *FrameHeader) { h.Codec, h.StoredSize = CodecNone, h.UncompressedSize },
	} {
		h := good
		edit(&h)
		cases = append(cases, h)
	}
	for _, h := range cases {
		plausibleAgrees(t, h)
	}
}

// rawFields decodes a header's fields as ParseFrameHeader does, with no
// check.
func rawFields(b []byte) FrameHeader {
	return FrameHeader{
		Codec:            b[frameFlagsAt] & codecMask,
		RecordCount:      int32(binary.BigEndian.Uint32(b[frameCountAt:])),
		BaseOffset:       int64(binary.BigEndian.Uint64(b[frameBaseAt:])),
		UncompressedSize: binary.BigEndian.Uint32(b[frameUncompressedAt:]),
		StoredSize:       binary.BigEndian.Uint32(b[frameStoredAt:]),
	}
}

func plausibleAgrees(t *testing.T, h FrameHeader) {
	t.Helper()
	if problem, _ := headerProblem(h); plausible(&h) != (problem == "") {
		t.Fatalf("%+v: plausible %v, headerProblem %q", h, plausible(&h), problem)
	}
}

func FuzzCheckFrame(f *testing.F) {
	f.Add(testFrame(f, 0, 1, 0), false)
	f.Add(testFrame(f, 450832, 3, 17), false)
	f.Add(append(testFrame(f, 12, 2, 2), 0xCA, 0xFE), false)
	f.Add(rawHeader(FrameMagic, CodecZstd, 1, 0, 40, 3, 0), true)
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		if fixCRC {
			// Recompute the CRC so the fuzzer explores valid frames too.
			if h, err := ParseFrameHeader(b); err == nil && int64(len(b)) >= h.FrameLen() {
				b = bytes.Clone(b)
				binary.BigEndian.PutUint32(b[frameCRCAt:], frameCRC(b[:FrameHeaderSize], h.Stored(b)))
			}
		}
		h, err := CheckFrame(b)
		checkFrameSumAgrees(t, b, err)
		// WholeFrame is the verdict before the CRC, exactly: the header
		// parses and b holds the whole frame; with CRCMatches, CheckFrame's.
		wh, whole := WholeFrame(b)
		if ph, perr := ParseFrameHeader(b); whole != (perr == nil && int64(len(b)) >= ph.FrameLen()) || whole && wh != ph {
			t.Fatalf("WholeFrame: %+v, %v; ParseFrameHeader: %+v, %v, %d bytes", wh, whole, ph, perr, len(b))
		}
		if valid := whole && wh.CRCMatches(b); valid != (err == nil) || valid && wh != h {
			t.Fatalf("WholeFrame: %+v, %v, CRC matching %v; CheckFrame: %+v, %v", wh, whole, valid, h, err)
		}
		if err != nil {
			if !errorIsAny(err, ErrCorrupt, ErrTruncated) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		frame := b[:h.FrameLen()]
		again, err := AppendFrame(nil, h.Codec, h.BaseOffset, int(h.RecordCount), int(h.UncompressedSize), h.Stored(b))
		if err != nil {
			t.Fatalf("re-encoding a valid frame: %v", err)
		}
		if !bytes.Equal(again, frame) {
			t.Fatalf("re-encoded frame %x, input %x", again, frame)
		}
	})
}

// checkFrameSumAgrees: a FrameSum fed a frame in parts (split into two at
// up to 512 places, and byte by byte) gives CheckFrame's verdict, whenever the header
// parses and the bytes hold the whole frame.
func checkFrameSumAgrees(t *testing.T, b []byte, checkErr error) {
	t.Helper()
	h, err := ParseFrameHeader(b)
	if err != nil || int64(len(b)) < h.FrameLen() {
		return
	}
	frame := b[:h.FrameLen()]
	verdict := func(parts ...[]byte) error {
		var s FrameSum
		for _, p := range parts {
			s.Write(p)
		}
		return s.Check(h)
	}
	for cut := 0; cut <= len(frame); cut += 1 + len(frame)/512 { // a bounded number of cuts
		if got := verdict(frame[:cut], frame[cut:]); (got == nil) != (checkErr == nil) {
			t.Fatalf("split at %d: FrameSum says %v, CheckFrame %v", cut, got, checkErr)
		}
	}
	var bytewise [][]byte
	for i := range frame {
		bytewise = append(bytewise, frame[i:i+1])
	}
	if got := verdict(bytewise...); (got == nil) != (checkErr == nil) {
		t.Fatalf("byte by byte: FrameSum says %v, CheckFrame %v", got, checkErr)
	}
}

func TestFrameSum_AgreesWithCheckFrame(t *testing.T) {
	frame := testFrame(t, 1000, 3, 10)
	checkFrameSumAgrees(t, frame, nil)
	for i := range len(frame) * 8 {
		flipped := bytes.Clone(frame)
		flipped[i/8] ^= 1 << (i % 8)
		_, err := CheckFrame(flipped)
		checkFrameSumAgrees(t, flipped, err)
	}
	var s FrameSum
	s.Write(frame[:len(frame)-1])
	h, _ := ParseFrameHeader(frame)
	wantErr(t, s.Check(h), ErrTruncated)
	s.Write(frame[len(frame)-1:])
	s.Write([]byte{0})
	wantErr(t, s.Check(h), ErrCorrupt)
}
