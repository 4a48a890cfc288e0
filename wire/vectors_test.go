package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readHexVector reads a hand-written vector from testdata: '#' starts a
// comment, every other character pair is a byte in hex, and a line
// "@zeros-to N" appends zero bytes up to length N.
func readHexVector(t *testing.T, name string) []byte {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for lineNo, line := range strings.Split(string(text), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "@zeros-to "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil || n < len(out) {
				t.Fatalf("%s:%d: bad directive %q", name, lineNo+1, line)
			}
			out = append(out, make([]byte, n-len(out))...)
			continue
		}
		b, err := hex.DecodeString(strings.Join(strings.Fields(line), ""))
		if err != nil {
			t.Fatalf("%s:%d: %v", name, lineNo+1, err)
		}
		out = append(out, b...)
	}
	return out
}

// crc32cBitwise is CRC-32C (Castagnoli, reflected polynomial 0x82F63B78)
// computed one bit at a time: an implementation independent of hash/crc32,
// used to check the CRCs written into the vectors.
func crc32cBitwise(parts ...[]byte) uint32 {
	crc := ^uint32(0)
	for _, part := range parts {
		for _, b := range part {
			crc ^= uint32(b)
			for range 8 {
				if crc&1 != 0 {
					crc = crc>>1 ^ 0x82F63B78
				} else {
					crc >>= 1
				}
			}
		}
	}
	return ^crc
}

func TestCRC32CBitwise_CheckValue(t *testing.T) {
	// The CRC-32C check value from the catalogue of parametrised CRCs.
	if got := crc32cBitwise([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("crc32c(123456789) = 0x%08x, want 0xE3069283", got)
	}
}

// The values the vector files spell out in their comments.
var (
	vectorKey     = []byte("user-42")
	vectorTime0   = int64(1764450000123)
	vectorTime1   = int64(1764450000124)
	vectorValue0  = []byte(`{"total": 12.5}`)
	vectorValue1  = []byte("no key")
	vectorBase    = int64(450832)
	vectorAheadID = IncarnationID("3f9a1c0e7b2d4a61")
)

func TestVector_FrameHandComputed(t *testing.T) {
	file := readHexVector(t, "frame_none_2records.hex")

	// The CRC in the vector matches an independent bitwise CRC-32C over
	// header[2:23] and the payload (design: "Castagnoli over header[2:23] + payload").
	if want, got := crc32cBitwise(file[2:23], file[27:]), binary.BigEndian.Uint32(file[23:27]); got != want {
		t.Fatalf("vector crc 0x%08x, bitwise crc32c 0x%08x", got, want)
	}

	// Encoding the same inputs gives the same bytes.
	env0, err := AppendEnvelope(nil, vectorKey, vectorTime0, vectorValue0)
	if err != nil {
		t.Fatal(err)
	}
	env1, err := AppendEnvelope(nil, nil, vectorTime1, vectorValue1)
	if err != nil {
		t.Fatal(err)
	}
	var payload []byte
	for _, env := range [][]byte{env0, env1} {
		if payload, err = AppendRecordFrame(payload, env); err != nil {
			t.Fatal(err)
		}
	}
	if len(payload) != EncodedPayloadSize([][]byte{env0, env1}) {
		t.Fatalf("payload %d bytes, EncodedPayloadSize says %d", len(payload), EncodedPayloadSize([][]byte{env0, env1}))
	}
	frame, err := AppendFrame(nil, CodecNone, vectorBase, 2, len(payload), payload)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(frame, file) {
		t.Fatalf("encoded frame differs from the vector\n got %x\nwant %x", frame, file)
	}

	// Decoding the vector gives the inputs back.
	h, err := CheckFrame(file)
	if err != nil {
		t.Fatal(err)
	}
	want := FrameHeader{Codec: CodecNone, RecordCount: 2, BaseOffset: vectorBase, UncompressedSize: 56, StoredSize: 56, CRC: 0x908D8717}
	if h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	records, err := SplitRecords(nil, h.Stored(file), int(h.RecordCount))
	if err != nil {
		t.Fatal(err)
	}
	wantEnvelopes := []Envelope{
		{Key: vectorKey, CommittedAtUnixMs: vectorTime0, Payload: vectorValue0},
		{Key: nil, CommittedAtUnixMs: vectorTime1, Payload: vectorValue1},
	}
	for i, record := range records {
		env, err := ParseEnvelope(record)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		assertEnvelope(t, env, wantEnvelopes[i])
	}
}

func TestVector_EnvelopeHandComputed(t *testing.T) {
	file := readHexVector(t, "envelope_v2.hex")
	got, err := AppendEnvelope(nil, vectorKey, vectorTime0, vectorValue0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, file) {
		t.Fatalf("encoded envelope differs from the vector\n got %x\nwant %x", got, file)
	}
	env, err := ParseEnvelope(file)
	if err != nil {
		t.Fatal(err)
	}
	assertEnvelope(t, env, Envelope{Key: vectorKey, CommittedAtUnixMs: vectorTime0, Payload: vectorValue0})
}

func TestVector_AheadSlotHandComputed(t *testing.T) {
	file := readHexVector(t, "ahead_slot.hex")
	if len(file) != AheadSlotSize {
		t.Fatalf("vector is %d bytes, want %d", len(file), AheadSlotSize)
	}
	if want, got := crc32cBitwise(file[:4092]), binary.BigEndian.Uint32(file[4092:]); got != want {
		t.Fatalf("vector crc 0x%08x, bitwise crc32c 0x%08x", got, want)
	}
	rec := AheadRecord{Sequence: 7, Incarnation: vectorAheadID, Frontier: 1200, Ahead: []int64{1202, 1203, 1500}}
	var slot [AheadSlotSize]byte
	if stored, err := EncodeAheadSlot(&slot, rec); err != nil || stored != 3 {
		t.Fatalf("EncodeAheadSlot = %d, %v", stored, err)
	}
	if !bytes.Equal(slot[:], file) {
		t.Fatalf("encoded slot differs from the vector\n got %x\nwant %x", slot[:48], file[:48])
	}
	got, err := DecodeAheadSlot(file)
	if err != nil {
		t.Fatal(err)
	}
	assertAheadRecord(t, got, rec)
}

func assertEnvelope(t *testing.T, got, want Envelope) {
	t.Helper()
	if !bytes.Equal(got.Key, want.Key) || got.CommittedAtUnixMs != want.CommittedAtUnixMs || !bytes.Equal(got.Payload, want.Payload) {
		t.Fatalf("envelope {%q %d %q}, want {%q %d %q}", got.Key, got.CommittedAtUnixMs, got.Payload, want.Key, want.CommittedAtUnixMs, want.Payload)
	}
}

func assertAheadRecord(t *testing.T, got, want AheadRecord) {
	t.Helper()
	if !aheadEqual(got, want) {
		t.Fatalf("ahead record %+v, want %+v", got, want)
	}
}

func aheadEqual(a, b AheadRecord) bool {
	return a.Sequence == b.Sequence && a.Incarnation == b.Incarnation && a.Frontier == b.Frontier &&
		a.Truncated == b.Truncated && slices.Equal(a.Ahead, b.Ahead)
}

// errorIsAny reports whether err wraps one of sentinels.
func errorIsAny(err error, sentinels ...error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// wantErr fails unless err wraps sentinel (or is nil when sentinel is nil).
func wantErr(t *testing.T, err, sentinel error) {
	t.Helper()
	if sentinel == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want one wrapping %v", err, sentinel)
	}
}
