package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/narad-io/storage/internal/testmem"
)

// Hand-built zstd frames (RFC 8878, section 3.1.1).

var zstdMagicBytes = []byte{0x28, 0xB5, 0x2F, 0xFD}

const (
	frameHeaderFCS8Bytes = 3 << 6 // Frame_Content_Size_Flag: 8-byte field
	frameHeaderSingle    = 1 << 5 // Single_Segment_Flag
	frameHeaderChecksum  = 1 << 2 // Content_Checksum_Flag
	frameHeaderDict1Byte = 1      // Dictionary_ID_Flag: 1-byte id
)

// handFrame returns a single-segment frame header declaring contentSize in an
// 8-byte field, followed by blocks.
func handFrame(contentSize uint64, checksum bool, blocks ...[]byte) []byte {
	descriptor := byte(frameHeaderFCS8Bytes | frameHeaderSingle)
	if checksum {
		descriptor |= frameHeaderChecksum
	}
	frame := append(bytes.Clone(zstdMagicBytes), descriptor)
	frame = binary.LittleEndian.AppendUint64(frame, contentSize)
	for _, block := range blocks {
		frame = append(frame, block...)
	}
	return frame
}

func handBlockHeader(last bool, blockType, size int) []byte {
	header := uint32(size)<<3 | uint32(blockType)<<1
	if last {
		header |= 1
	}
	return []byte{byte(header), byte(header >> 8), byte(header >> 16)}
}

func rawBlock(last bool, data []byte) []byte {
	return append(handBlockHeader(last, zstdBlockTypeRaw, len(data)), data...)
}

func rleBlock(last bool, size int, value byte) []byte {
	return append(handBlockHeader(last, zstdBlockTypeRLE, size), value)
}

// reframe returns encoded (one frame from our encoder) with its header
// replaced by one declaring contentSize, keeping its blocks.
func reframe(t testing.TB, encoded []byte, contentSize uint64) []byte {
	t.Helper()
	var header zstd.Header
	if err := header.Decode(encoded); err != nil {
		t.Fatalf("reframe: %v", err)
	}
	return append(handFrame(contentSize, header.HasCheckSum), encoded[header.HeaderSize:]...)
}

// warmZstd creates the shared encoder and decoder, fills the decoder's
// per-block buffers and the scratch pool, so allocation counts that follow
// see only what a decode itself allocates.
func warmZstd(t testing.TB) {
	t.Helper()
	for _, payload := range [][]byte{
		newEventGenerator(51).framePayload(1),
		newEventGenerator(52).framePayload(500),
		repetitiveBytes(3 << 20),
		randomBytes(53, 200<<10),
	} {
		encoded := encodeOrFatal(t, zstdCodec{}, payload)
		if _, err := (zstdCodec{}).Decode(nil, encoded, len(payload)); err != nil {
			t.Fatalf("warm-up decode: %v", err)
		}
	}
	rle := handFrame(2*zstdMaxBlockBytes, false, rleBlock(false, zstdMaxBlockBytes, 'a'), rawBlock(true, repetitiveBytes(zstdMaxBlockBytes)))
	if _, err := (zstdCodec{}).Decode(nil, rle, 2*zstdMaxBlockBytes); err != nil {
		t.Fatalf("warm-up decode: %v", err)
	}
}

func TestZstdEncoderWritesContentSize(t *testing.T) {
	for _, size := range []int{0, 1, 300, 1<<10 - 1, 1 << 10, 5000, 128 << 10, 1 << 20, 9 << 20} {
		encoded := encodeOrFatal(t, zstdCodec{}, repetitiveBytes(size))
		var header zstd.Header
		if err := header.Decode(encoded); err != nil {
			t.Fatalf("size %d: zstd.Header.Decode: %v", size, err)
		}
		if !header.HasFCS || header.FrameContentSize != uint64(size) {
			t.Errorf("size %d: header content size present=%v value=%d", size, header.HasFCS, header.FrameContentSize)
		}
		if !header.SingleSegment || header.HasCheckSum || header.DictionaryID != 0 || header.Skippable {
			t.Errorf("size %d: header %+v, want single segment, no checksum, no dictionary", size, header)
		}
	}
}

// TestZstdOwnFramesNeedNoHeadroom pins the claim in inspectZstdFrame's
// comment: frames of 1 KiB to 128 KiB from our encoder (one block, window =
// content size) and frames of whole blocks decode straight into a buffer of
// exactly their size.
func TestZstdOwnFramesNeedNoHeadroom(t *testing.T) {
	generator := newEventGenerator(61)
	var payloads [][]byte
	for recordCount := 4; recordCount < 400; recordCount += 37 {
		payloads = append(payloads, generator.framePayload(recordCount))
	}
	payloads = append(payloads,
		repetitiveBytes(1<<10), randomBytes(62, 5000), repetitiveBytes(128<<10),
		repetitiveBytes(256<<10), repetitiveBytes(1<<20), randomBytes(63, 1<<20))
	for _, payload := range payloads {
		if len(payload) > 128<<10 && len(payload)%(128<<10) != 0 {
			continue
		}
		encoded := encodeOrFatal(t, zstdCodec{}, payload)
		layout, err := inspectZstdFrame(encoded, len(payload))
		if err != nil {
			t.Fatalf("%d bytes: inspectZstdFrame: %v", len(payload), err)
		}
		if layout.headroomBytes != 0 {
			t.Errorf("%d-byte frame from our encoder wants %d bytes of headroom", len(payload), layout.headroomBytes)
		}
	}
}

func TestZstdRejectsHostileFrames(t *testing.T) {
	warmZstd(t)
	hundredBytes := repetitiveBytes(100)
	smallEncoded := encodeOrFatal(t, zstdCodec{}, newEventGenerator(71).framePayload(1))
	withoutContentSize := append(bytes.Clone(zstdMagicBytes), 0x00, 0x00) // no flags, window 1 KiB
	withoutContentSize = append(withoutContentSize, rawBlock(true, hundredBytes)...)
	withDictionary := append(bytes.Clone(zstdMagicBytes), frameHeaderSingle|frameHeaderDict1Byte, 7, 100)
	withDictionary = append(withDictionary, rawBlock(true, hundredBytes)...)
	skippable := []byte{0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4}
	valid := handFrame(100, false, rawBlock(true, hundredBytes))

	for _, test := range []struct {
		name        string
		src         []byte
		decodedSize int
	}{
		{"content size 1 TiB, decodedSize 100", handFrame(1<<40, false, rawBlock(true, hundredBytes)), 100},
		{"content size 2^63, decodedSize max", handFrame(1<<63, false, rawBlock(true, hundredBytes)), MaxDecodedBytes},
		{"content size 200 MiB as declared, one raw block", handFrame(200<<20, false, rawBlock(true, hundredBytes)), 200 << 20},
		{"content size 200 MiB as declared, one compressed block", reframe(t, smallEncoded, 200<<20), 200 << 20},
		{"content size max as declared, 1000 RLE blocks", handFrame(MaxDecodedBytes, false,
			bytes.Repeat(rleBlock(false, 128<<10, 'z'), 1000)), MaxDecodedBytes},
		{"content size 100, decodedSize 99", valid, 99},
		{"content size 100, decodedSize 101", valid, 101},
		{"decodedSize above MaxDecodedBytes", handFrame(MaxDecodedBytes+1, false, rawBlock(true, hundredBytes)), MaxDecodedBytes + 1},
		{"decodedSize negative", valid, -1},
		{"no content size", withoutContentSize, 100},
		{"dictionary", withDictionary, 100},
		{"skippable frame", skippable, 0},
		{"raw blocks past content size", handFrame(1000, false, rawBlock(false, repetitiveBytes(600)), rawBlock(true, repetitiveBytes(600))), 1000},
		{"RLE block past content size", handFrame(1000, false, rleBlock(true, 1001, 'a')), 1000},
		{"raw block larger than window", handFrame(100, false, rawBlock(true, repetitiveBytes(2000))), 100},
		{"block larger than 128 KiB", handFrame(200<<10, false, rleBlock(true, 200<<10, 'a')), 200 << 10},
		{"trailing byte", append(bytes.Clone(valid), 0), 100},
		{"two frames", append(bytes.Clone(valid), valid...), 100},
		{"checksum truncated", handFrame(100, true, rawBlock(true, hundredBytes), []byte{1, 2}), 100},
		{"reserved block type", handFrame(100, false, handBlockHeader(true, 3, 100), hundredBytes), 100},
		{"compressed block of 1 byte", handFrame(100, false, handBlockHeader(true, zstdBlockTypeCompressed, 1), []byte{0}), 100},
		{"last block missing", handFrame(100, false, rawBlock(false, hundredBytes)), 100},
		{"block truncated", handFrame(100, false, rawBlock(true, hundredBytes))[:60], 100},
		{"header truncated", valid[:7], 100},
	} {
		t.Run(test.name, func(t *testing.T) {
			var decoded []byte
			var err error
			allocated := testmem.Allocated(func() {
				decoded, err = (zstdCodec{}).Decode(nil, test.src, test.decodedSize)
			})
			if !errors.Is(err, ErrCorrupt) || decoded != nil {
				t.Fatalf("Decode = %d bytes, %v; want nil, ErrCorrupt", len(decoded), err)
			}
			if allocated >= 1<<20 {
				t.Fatalf("rejecting the frame allocated %d bytes (%v)", allocated, err)
			}
		})
	}
}

// TestZstdOverrunNeverGrowsBuffer feeds frames whose header matches
// decodedSize but whose compressed blocks decode to more: the decoder only
// notices after the block that overruns, so without headroom it would grow
// (reallocate) the whole buffer. Decode must fail having allocated about
// decodedSize, never a multiple of it.
func TestZstdOverrunNeverGrowsBuffer(t *testing.T) {
	warmZstd(t)
	for _, test := range []struct {
		name      string
		payload   []byte
		shortBy   uint64
		extraRoom uint64 // what Decode may allocate beyond decodedSize
	}{
		// Decoded straight into a new buffer of decodedSize + headroom.
		{"4MiB_records/short=1", newEventGenerator(81).framePayload(12_000), 1, 256 << 10},
		{"4MiB_records/short=7", newEventGenerator(81).framePayload(12_000), 7, 256 << 10},
		{"4MiB_repetitive/short=64KiB", repetitiveBytes(4 << 20), 64 << 10, 256 << 10},
		// Decoded into the pooled scratch buffer.
		{"200KiB_records/short=1", newEventGenerator(83).framePayload(600), 1, 4 << 10},
		{"200KiB_records/short=5000", newEventGenerator(83).framePayload(600), 5000, 4 << 10},
		{"3_records/short=1", newEventGenerator(84).framePayload(3), 1, 256},
		{"small_repetitive/short=1", repetitiveBytes(1000), 1, 256},
		{"small_repetitive/short=100", repetitiveBytes(300), 100, 256},
	} {
		t.Run(test.name, func(t *testing.T) {
			encoded := encodeOrFatal(t, zstdCodec{}, test.payload)
			decodedSize := uint64(len(test.payload)) - test.shortBy
			src := reframe(t, encoded, decodedSize)
			if _, err := inspectZstdFrame(src, int(decodedSize)); err != nil {
				t.Fatalf("the frame should get past the header checks to the decoder: %v", err)
			}
			var decoded []byte
			var err error
			// A garbage collection since the warm-up may have emptied the
			// scratch pool: fill it again.
			zstdScratchPool.Put(getZstdScratch())
			allocated := testmem.Allocated(func() {
				decoded, err = (zstdCodec{}).Decode(nil, src, int(decodedSize))
			})
			if !errors.Is(err, ErrCorrupt) || decoded != nil {
				t.Fatalf("Decode = %d bytes, %v; want nil, ErrCorrupt", len(decoded), err)
			}
			limit := decodedSize + test.extraRoom
			t.Logf("decodedSize %d: allocated %d", decodedSize, allocated)
			if raceEnabled {
				limit += zstdScratchBytes + 64<<10 // sync.Pool drops buffers under -race
			}
			if allocated > limit {
				t.Fatalf("Decode allocated %d bytes for decodedSize %d (limit %d): %v", allocated, decodedSize, limit, err)
			}
		})
	}
}

// TestZstdDeclaredSizeIsHonoured decodes a legitimate frame that expands 500
// times (RLE blocks): the declared size is allocated, once.
func TestZstdDeclaredSizeIsHonoured(t *testing.T) {
	warmZstd(t)
	const decodedSize = 16 << 20
	src := handFrame(decodedSize, false,
		bytes.Repeat(rleBlock(false, zstdMaxBlockBytes, 'q'), decodedSize/zstdMaxBlockBytes-1),
		rleBlock(true, zstdMaxBlockBytes, 'q'))
	var decoded []byte
	var err error
	allocated := testmem.Allocated(func() {
		decoded, err = (zstdCodec{}).Decode(nil, src, decodedSize)
	})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !bytes.Equal(decoded, bytes.Repeat([]byte{'q'}, decodedSize)) {
		t.Fatalf("Decode returned the wrong bytes")
	}
	if allocated > decodedSize+(1<<20) {
		t.Fatalf("Decode of %d declared bytes allocated %d", decodedSize, allocated)
	}
}

// TestDecodeIntoRoomyDstDoesNotAllocate: with a dst that fits, decoding costs
// no allocation at all, so a free list of read buffers makes reads
// allocation-free.
func TestDecodeIntoRoomyDstDoesNotAllocate(t *testing.T) {
	warmZstd(t)
	for _, codec := range codecsUnderTest(t) {
		for _, payload := range [][]byte{
			newEventGenerator(91).framePayload(1),
			newEventGenerator(92).framePayload(500),
			repetitiveBytes(3 << 20),
		} {
			encoded := encodeOrFatal(t, codec, payload)
			dst := make([]byte, 0, len(payload)+zstdMaxBlockBytes)
			allocations := testing.AllocsPerRun(20, func() {
				if _, err := codec.Decode(dst, encoded, len(payload)); err != nil {
					t.Fatalf("Decode: %v", err)
				}
			})
			if allocations != 0 && !raceEnabled {
				t.Errorf("%s: Decode of %d bytes into a roomy dst: %.1f allocations, want 0", codec.Name(), len(payload), allocations)
			}
		}
	}
}

func ExampleCodec() {
	codec, err := ByName("zstd")
	if err != nil {
		panic(err)
	}
	payload := bytes.Repeat([]byte(`{"order_id":1,"currency":"EUR"}`), 10)
	stored, _ := codec.Encode(nil, payload)
	// The frame header keeps codec.ID() and len(payload); a read passes them back.
	decoded, err := codec.Decode(nil, stored, len(payload))
	fmt.Println(codec.ID(), len(payload), len(stored) < len(payload), bytes.Equal(decoded, payload), err)
	// Output: zstd 310 true true <nil>
}
