package codec

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// codecsUnderTest returns every codec, looked up the way the engine does.
func codecsUnderTest(t testing.TB) []Codec {
	t.Helper()
	var codecs []Codec
	for _, id := range []ID{None, Zstd} {
		codec, err := ByID(id)
		if err != nil {
			t.Fatalf("ByID(%d): %v", id, err)
		}
		codecs = append(codecs, codec)
	}
	return append(codecs, WithDictionary(dictionaryOrFatal(t), nil))
}

type namedInput struct {
	name string
	data []byte
}

// roundTripInputs covers empty, small, 1 MiB random and repetitive inputs,
// the engine's own payloads, and sizes at the edges zstd cares about (its
// 1 KiB minimum window and 128 KiB blocks).
func roundTripInputs() []namedInput {
	oneRecord := newEventGenerator(11).framePayload(1)
	busyFrame := newEventGenerator(12).framePayload(500)
	return []namedInput{
		{"empty", []byte{}},
		{"one_byte", []byte{'x'}},
		{"small", []byte("hello, storage")},
		{"one_record", oneRecord},
		{"records=500", busyFrame},
		{"random_1KiB-1", randomBytes(1, 1<<10-1)},
		{"random_1KiB", randomBytes(2, 1<<10)},
		{"repetitive_128KiB", repetitiveBytes(128 << 10)},
		{"repetitive_128KiB+1", repetitiveBytes(128<<10 + 1)},
		{"random_1MiB", randomBytes(3, 1<<20)},
		{"repetitive_1MiB", repetitiveBytes(1 << 20)},
		{"repetitive_1MiB+7", repetitiveBytes(1<<20 + 7)},
		{"records_3MiB", newEventGenerator(13).framePayload(9000)},
	}
}

func encodeOrFatal(t testing.TB, codec Codec, data []byte) []byte {
	t.Helper()
	encoded, err := codec.Encode(nil, data)
	if err != nil {
		t.Fatalf("%s: Encode(%d bytes): %v", codec.Name(), len(data), err)
	}
	return encoded
}

func TestByIDAndByName(t *testing.T) {
	for _, want := range []struct {
		id   ID
		name string
	}{{None, "none"}, {Zstd, "zstd"}} {
		byID, err := ByID(want.id)
		if err != nil {
			t.Fatalf("ByID(%d): %v", want.id, err)
		}
		byName, err := ByName(want.name)
		if err != nil {
			t.Fatalf("ByName(%q): %v", want.name, err)
		}
		for _, codec := range []Codec{byID, byName} {
			if codec.ID() != want.id || codec.Name() != want.name {
				t.Errorf("codec for %d/%q says %d/%q", want.id, want.name, codec.ID(), codec.Name())
			}
		}
		if got := want.id.String(); got != want.name {
			t.Errorf("ID(%d).String() = %q, want %q", want.id, got, want.name)
		}
	}
	for _, id := range []ID{3, 7, 8, 255} {
		if codec, err := ByID(id); !errors.Is(err, ErrUnknownCodec) || codec != nil {
			t.Errorf("ByID(%d) = %v, %v; want nil, ErrUnknownCodec", id, codec, err)
		}
	}
	for _, name := range []string{"", "ZSTD", "Zstd", " zstd", "gzip", "lz4", "snappy"} {
		if codec, err := ByName(name); !errors.Is(err, ErrUnknownCodec) || codec != nil {
			t.Errorf("ByName(%q) = %v, %v; want nil, ErrUnknownCodec", name, codec, err)
		}
	}
	if got := ID(5).String(); got != "codec(5)" {
		t.Errorf("ID(5).String() = %q", got)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, codec := range codecsUnderTest(t) {
		for _, input := range roundTripInputs() {
			t.Run(fmt.Sprintf("codec=%s/input=%s", codec.Name(), input.name), func(t *testing.T) {
				encoded := encodeOrFatal(t, codec, input.data)
				decoded, err := codec.Decode(nil, encoded, len(input.data))
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if len(decoded) != len(input.data) || !bytes.Equal(decoded, input.data) {
					t.Fatalf("Decode returned %d bytes that differ from the %d encoded", len(decoded), len(input.data))
				}

				// Encode appends to dst and leaves what was there.
				prefix := []byte("frame header stand-in")
				appended, err := codec.Encode(bytes.Clone(prefix), input.data)
				if err != nil {
					t.Fatalf("Encode after a prefix: %v", err)
				}
				if !bytes.Equal(appended[:len(prefix)], prefix) || !bytes.Equal(appended[len(prefix):], encoded) {
					t.Fatalf("Encode(prefix, src) is not prefix followed by Encode(nil, src)")
				}
			})
		}
	}
}

func TestDecodeBuffers(t *testing.T) {
	for _, codec := range codecsUnderTest(t) {
		for _, input := range roundTripInputs() {
			size := len(input.data)
			if size == 0 {
				continue
			}
			t.Run(fmt.Sprintf("codec=%s/input=%s", codec.Name(), input.name), func(t *testing.T) {
				encoded := encodeOrFatal(t, codec, input.data)
				headroom := 0
				if codec.ID() == Zstd || codec.ID() == ZstdDict {
					layout, err := inspectZstdFrame(encoded, size)
					if err != nil {
						t.Fatalf("inspectZstdFrame of our own frame: %v", err)
					}
					headroom = layout.headroomBytes
				}

				// A roomy dst is reused: the result starts at dst's first byte.
				roomy := bytes.Repeat([]byte{0xAA}, size+zstdMaxBlockBytes)[:3]
				decoded, err := codec.Decode(roomy, encoded, size)
				if err != nil {
					t.Fatalf("Decode into a roomy dst: %v", err)
				}
				if !bytes.Equal(decoded, input.data) || &decoded[0] != &roomy[:1][0] {
					t.Fatalf("Decode into a dst of capacity %d did not return dst[:%d] holding the data", cap(roomy), size)
				}

				// The result does not alias src: clobbering src leaves it intact.
				clobbered := bytes.Clone(encoded)
				decoded, err = codec.Decode(nil, clobbered, size)
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				for i := range clobbered {
					clobbered[i] ^= 0xFF
				}
				if !bytes.Equal(decoded, input.data) {
					t.Fatalf("result changed when src was overwritten: it aliases src")
				}

				// Without a usable dst the result is exactly as wide as the
				// data, except for a zstd frame over 1 MiB that needs
				// headroom, which gets at most one block more.
				wantCap := size
				if size+headroom > zstdScratchBytes {
					wantCap = size + headroom
				}
				if cap(decoded) != wantCap {
					t.Fatalf("Decode(nil) returned capacity %d, want %d (size %d, headroom %d)", cap(decoded), wantCap, size, headroom)
				}

				// A dst of exactly size bytes is reused when no headroom is
				// needed, and otherwise left alone.
				exact := make([]byte, 0, size)
				decoded, err = codec.Decode(exact, encoded, size)
				if err != nil {
					t.Fatalf("Decode into an exact dst: %v", err)
				}
				if !bytes.Equal(decoded, input.data) {
					t.Fatalf("Decode into an exact dst returned other bytes")
				}
				if reused := &decoded[0] == &exact[:1][0]; reused != (headroom == 0 || size+headroom <= zstdScratchBytes) {
					t.Fatalf("Decode into an exact dst: reused %v with headroom %d", reused, headroom)
				}
			})
		}
	}
}

// TestDecodeResultsStayValid decodes many frames, small ones through the
// scratch buffer, and checks every result at the end: none was handed out
// from a buffer the codec used again.
func TestDecodeResultsStayValid(t *testing.T) {
	for _, codec := range codecsUnderTest(t) {
		generator := newEventGenerator(21)
		var payloads, results [][]byte
		for i := range 200 {
			payload := generator.framePayload(1 + i%7)
			if i%50 == 0 {
				payload = generator.framePayload(600)
			}
			encoded := encodeOrFatal(t, codec, payload)
			decoded, err := codec.Decode(nil, encoded, len(payload))
			if err != nil {
				t.Fatalf("%s: frame %d: Decode: %v", codec.Name(), i, err)
			}
			payloads = append(payloads, payload)
			results = append(results, decoded)
		}
		for i := range payloads {
			if !bytes.Equal(payloads[i], results[i]) {
				t.Fatalf("%s: result %d changed after later decodes", codec.Name(), i)
			}
		}
	}
}

func TestDecodedSizeMismatch(t *testing.T) {
	inputs := []namedInput{
		{"small", []byte("hello, storage")},
		{"one_record", newEventGenerator(31).framePayload(1)},
		{"repetitive_1MiB", repetitiveBytes(1 << 20)},
		{"empty", []byte{}},
	}
	for _, codec := range codecsUnderTest(t) {
		for _, input := range inputs {
			encoded := encodeOrFatal(t, codec, input.data)
			size := len(input.data)
			for _, wrongSize := range []int{size - 1, size + 1, size / 2, size * 2, 0, -1, MaxDecodedBytes, MaxDecodedBytes + 1, -MaxDecodedBytes} {
				if wrongSize == size {
					continue
				}
				decoded, err := codec.Decode(nil, encoded, wrongSize)
				if !errors.Is(err, ErrCorrupt) || decoded != nil {
					t.Errorf("%s/%s: Decode with size %d of a %d-byte payload = %d bytes, %v; want nil, ErrCorrupt",
						codec.Name(), input.name, wrongSize, size, len(decoded), err)
				}
			}
		}
	}
}

// checkDecodeOutcome fails unless Decode either failed with ErrCorrupt or
// returned exactly decodedSize bytes.
func checkDecodeOutcome(t *testing.T, what string, decoded []byte, err error, decodedSize int) {
	t.Helper()
	if err != nil {
		// A frame that names a dictionary the codec lacks is intact as far
		// as the codec can tell: ErrDictionaryMissing, the one other failure.
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrDictionaryMissing) {
			t.Fatalf("%s: error %v wraps neither ErrCorrupt nor ErrDictionaryMissing", what, err)
		}
		if decoded != nil {
			t.Fatalf("%s: error %v came with %d bytes", what, err, len(decoded))
		}
		return
	}
	if len(decoded) != decodedSize {
		t.Fatalf("%s: no error but %d bytes, want %d", what, len(decoded), decodedSize)
	}
}

func TestDecodeGarbage(t *testing.T) {
	zstdMagic := []byte{0x28, 0xB5, 0x2F, 0xFD}
	for _, codec := range codecsUnderTest(t) {
		// Random bytes, bare and behind a zstd magic number.
		for seed := range uint64(300) {
			garbage := randomBytes(seed, int(seed*7%997))
			if seed%2 == 0 {
				garbage = append(bytes.Clone(zstdMagic), garbage...)
			}
			for _, size := range []int{0, 1, len(garbage), 4096, 1 << 20} {
				decoded, err := codec.Decode(nil, garbage, size)
				checkDecodeOutcome(t, fmt.Sprintf("%s: garbage seed %d, size %d", codec.Name(), seed, size), decoded, err, size)
			}
		}

		// Every prefix and every single-bit flip of a real frame.
		payload := newEventGenerator(41).framePayload(3)
		encoded := encodeOrFatal(t, codec, payload)
		for cut := range len(encoded) {
			decoded, err := codec.Decode(nil, encoded[:cut], len(payload))
			if err == nil {
				t.Fatalf("%s: frame cut to %d of %d bytes decoded without error", codec.Name(), cut, len(encoded))
			}
			checkDecodeOutcome(t, fmt.Sprintf("%s: cut at %d", codec.Name(), cut), decoded, err, len(payload))
		}
		for bit := range len(encoded) * 8 {
			flipped := bytes.Clone(encoded)
			flipped[bit/8] ^= 1 << (bit % 8)
			decoded, err := codec.Decode(nil, flipped, len(payload))
			checkDecodeOutcome(t, fmt.Sprintf("%s: bit %d flipped", codec.Name(), bit), decoded, err, len(payload))
		}
	}
}

func TestEncodeTooLarge(t *testing.T) {
	// Untouched, so the pages are never faulted in.
	tooLarge := make([]byte, MaxDecodedBytes+1)
	for _, codec := range codecsUnderTest(t) {
		dst := []byte("kept")
		encoded, err := codec.Encode(dst, tooLarge)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: Encode of MaxDecodedBytes+1 bytes: %v, want ErrTooLarge", codec.Name(), err)
		}
		if string(encoded) != "kept" {
			t.Errorf("%s: failed Encode changed dst to %d bytes", codec.Name(), len(encoded))
		}
	}
}
