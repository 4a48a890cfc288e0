package codec

import (
	"bytes"
	"testing"

	"github.com/narad-io/storage/internal/testmem"
)

// fuzzAllocationSlack is what a zstd Decode may allocate beyond decodedSize:
// the scratch buffer when the pool is empty, the decoder's per-block buffers
// the first time a block decoder meets a kind of block, error strings.
const fuzzAllocationSlack = zstdScratchBytes + 1<<20

// FuzzZstdDecode feeds arbitrary bytes and sizes to zstd Decode: it must not
// panic, must fail with ErrCorrupt or return exactly decodedSize bytes, and
// must never allocate more than decodedSize plus a constant.
func FuzzZstdDecode(f *testing.F) {
	addSeed := func(src []byte, decodedSize int) { f.Add(src, uint32(decodedSize)) }
	generator := newEventGenerator(101)
	for _, payload := range [][]byte{
		{}, []byte("x"), generator.framePayload(1), generator.framePayload(5),
		generator.framePayload(500), repetitiveBytes(300), repetitiveBytes(130 << 10), randomBytes(102, 2000),
	} {
		encoded := encodeOrFatal(f, zstdCodec{}, payload)
		addSeed(encoded, len(payload))
		addSeed(encoded, len(payload)-1)
		addSeed(reframe(f, encoded, uint64(max(len(payload)-1, 0))), len(payload)-1)
	}
	hundredBytes := repetitiveBytes(100)
	addSeed(handFrame(100, false, rawBlock(true, hundredBytes)), 100)
	addSeed(handFrame(100, true, rawBlock(true, hundredBytes), []byte{1, 2, 3, 4}), 100)
	addSeed(handFrame(1000, false, rleBlock(false, 500, 'a'), rawBlock(true, repetitiveBytes(500))), 1000)
	addSeed(handFrame(200<<20, false, rleBlock(true, 128<<10, 'a')), 200<<20)
	addSeed(handFrame(1<<40, false, rawBlock(true, hundredBytes)), 100)

	f.Fuzz(func(t *testing.T, src []byte, size uint32) {
		decodedSize := int(size % (MaxDecodedBytes + 1))
		original := bytes.Clone(src)
		var decoded []byte
		var err error
		allocated := testmem.Allocated(func() {
			decoded, err = (zstdCodec{}).Decode(nil, src, decodedSize)
		})
		checkDecodeOutcome(t, "zstd Decode", decoded, err, decodedSize)
		if limit := uint64(decodedSize) + fuzzAllocationSlack; allocated > limit {
			t.Fatalf("Decode of %d src bytes with decodedSize %d allocated %d bytes (limit %d): %v",
				len(src), decodedSize, allocated, limit, err)
		}
		if !bytes.Equal(src, original) {
			t.Fatalf("Decode changed src")
		}
	})
}

// FuzzZstdDictDecode is FuzzZstdDecode for frames compressed with a
// dictionary, decoded through a set that holds the test dictionary: arbitrary
// bytes and sizes must fail with ErrCorrupt or ErrDictionaryMissing or give
// exactly decodedSize bytes, within the same allocation bound.
func FuzzZstdDictDecode(f *testing.F) {
	d := dictionaryOrFatal(f)
	var set DictionarySet
	if err := set.Add(d); err != nil {
		f.Fatal(err)
	}
	decoder, err := ForFrame(ZstdDict, &set)
	if err != nil {
		f.Fatal(err)
	}
	encoder := WithDictionary(d, nil)
	generator := newEventGenerator(202)
	for _, payload := range [][]byte{
		{}, []byte("x"), generator.framePayload(1), generator.framePayload(5),
		generator.framePayload(500), repetitiveBytes(130 << 10), randomBytes(103, 2000),
	} {
		encoded := encodeOrFatal(f, encoder, payload)
		f.Add(encoded, uint32(len(payload)))
		f.Add(encoded, uint32(max(len(payload)-1, 0)))
		// Warm the dictionary's decoder: its first use builds its tables.
		if _, err := decoder.Decode(nil, encoded, len(payload)); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte, size uint32) {
		decodedSize := int(size % (MaxDecodedBytes + 1))
		original := bytes.Clone(src)
		var decoded []byte
		var err error
		allocated := testmem.Allocated(func() {
			decoded, err = decoder.Decode(nil, src, decodedSize)
		})
		checkDecodeOutcome(t, "zstd-dict Decode", decoded, err, decodedSize)
		if limit := uint64(decodedSize) + fuzzAllocationSlack; allocated > limit {
			t.Fatalf("Decode of %d src bytes with decodedSize %d allocated %d bytes (limit %d): %v",
				len(src), decodedSize, allocated, limit, err)
		}
		if !bytes.Equal(src, original) {
			t.Fatalf("Decode changed src")
		}
	})
}

// FuzzRoundTrip encodes and decodes arbitrary payloads with every codec.
func FuzzRoundTrip(f *testing.F) {
	for _, input := range roundTripInputs() {
		if len(input.data) <= 256<<10 {
			f.Add(input.data)
		}
	}
	codecs := codecsUnderTest(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, codec := range codecs {
			encoded, err := codec.Encode(nil, payload)
			if err != nil {
				t.Fatalf("%s: Encode(%d bytes): %v", codec.Name(), len(payload), err)
			}
			if codec.ID() == Zstd || codec.ID() == ZstdDict {
				if _, err := inspectZstdFrame(encoded, len(payload)); err != nil {
					t.Fatalf("%s: our own frame fails the header checks: %v", codec.Name(), err)
				}
			}
			decoded, err := codec.Decode(nil, encoded, len(payload))
			if err != nil || !bytes.Equal(decoded, payload) {
				t.Fatalf("%s: round trip of %d bytes: %v", codec.Name(), len(payload), err)
			}
			reused := make([]byte, 0, len(payload)+zstdMaxBlockBytes)
			decoded, err = codec.Decode(reused, encoded, len(payload))
			if err != nil || !bytes.Equal(decoded, payload) {
				t.Fatalf("%s: round trip of %d bytes into a reused dst: %v", codec.Name(), len(payload), err)
			}
		}
	})
}
