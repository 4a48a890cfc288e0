package codec

import (
	"errors"
	"fmt"
	"strconv"
)

// MaxDecodedBytes is the largest payload a codec encodes or decodes: 256 MiB.
// It equals the on-disk frame bound (the frame header's uncompressed size is
// at most this), so every decodedSize read from a frame header is checked
// against it before anything is allocated.
const MaxDecodedBytes = 256 << 20

// ID identifies a codec in bits 0-2 of a frame's flags byte. The values are
// part of the on-disk format: never renumber them.
type ID uint8

const (
	// None stores the payload as it is.
	None ID = 0
	// Zstd stores the payload as one zstd frame (RFC 8878) that carries its
	// content size.
	Zstd ID = 1
	// ZstdDict stores the payload as one zstd frame compressed with a
	// dictionary the frame header names by id (see WithDictionary).
	ZstdDict ID = 2
)

// String returns the codec's name, or "codec(N)" for an unknown id.
func (id ID) String() string {
	switch id {
	case None:
		return noneName
	case Zstd:
		return zstdName
	case ZstdDict:
		return zstdDictName
	default:
		return "codec(" + strconv.Itoa(int(id)) + ")"
	}
}

var (
	// ErrUnknownCodec is returned by ByID and ByName for an id or a name no
	// codec has.
	ErrUnknownCodec = errors.New("codec: unknown codec")

	// ErrCorrupt is wrapped by every Decode failure: the input is not the
	// encoded form of exactly decodedSize bytes, or decodedSize itself is out
	// of bounds.
	ErrCorrupt = errors.New("codec: corrupt input")

	// ErrTooLarge is returned by Encode for an input longer than
	// MaxDecodedBytes.
	ErrTooLarge = errors.New("codec: input larger than MaxDecodedBytes")
)

// Codec encodes and decodes a frame payload. Implementations are stateless
// values safe for concurrent use by any number of goroutines.
type Codec interface {
	// ID is the codec's id as stored in the frame flags.
	ID() ID

	// Name is the codec's name as configured: "none" or "zstd"; "zstd-dict"
	// is the name of frames a topic's dictionary compressed, never
	// configured (ByName does not know it).
	Name() string

	// Encode appends the encoded form of src to dst and returns the extended
	// slice. src and dst must not overlap. It fails with ErrTooLarge, and
	// returns dst unchanged, when len(src) > MaxDecodedBytes. An empty src
	// is encoded too: decoding it with decodedSize 0 gives an empty result.
	Encode(dst, src []byte) ([]byte, error)

	// Decode decodes src, which must be the encoded form of exactly
	// decodedSize bytes, and returns the decoded bytes: a slice of length
	// decodedSize, or nil and an error wrapping ErrCorrupt. src and dst must
	// not overlap.
	//
	// Buffers: the result is dst[:decodedSize] when cap(dst) >= decodedSize,
	// and Decode may then write anywhere in dst[:cap(dst)]. Otherwise it is a
	// new slice of capacity decodedSize. One exception: a zstd frame over
	// 1 MiB whose blocks could overrun their declared size is decoded with up
	// to 128 KiB of headroom, so it reuses dst only if cap(dst) covers that
	// too, and a new slice carries it. A dst with 128 KiB to spare is always
	// reused.
	//
	// Aliasing: the result aliases dst or memory nobody else holds, never src
	// and never a buffer the codec keeps. Decode retains neither src nor dst
	// after it returns, so the caller may reuse src at once and keep the
	// result (and slices of it) for as long as it likes.
	//
	// Allocation: at most decodedSize + 128 KiB whatever src says, and
	// nothing when dst is reused, beyond zstd's pooled scratch buffer
	// (1 MiB + 128 KiB) and per-block decoder buffers when a pool is empty.
	// decodedSize < 0 or > MaxDecodedBytes, and an src whose own headers
	// disagree with decodedSize, are rejected before any allocation.
	Decode(dst, src []byte, decodedSize int) ([]byte, error)
}

// ByID returns the codec stored as id in frame flags, or an error wrapping
// ErrUnknownCodec. For ZstdDict it is a codec with no dictionaries: its
// Decode fails with ErrDictionaryMissing, its Encode with ErrNoDictionary
// (ForFrame and WithDictionary give it dictionaries).
func ByID(id ID) (Codec, error) {
	switch id {
	case None:
		return noneCodec{}, nil
	case Zstd:
		return zstdCodec{}, nil
	case ZstdDict:
		return zstdDictCodec{}, nil
	default:
		return nil, fmt.Errorf("%w: id %d", ErrUnknownCodec, uint8(id))
	}
}

// ByName returns the codec with the given name ("none" or "zstd", exactly as
// written), or an error wrapping ErrUnknownCodec.
func ByName(name string) (Codec, error) {
	switch name {
	case noneName:
		return noneCodec{}, nil
	case zstdName:
		return zstdCodec{}, nil
	default:
		return nil, fmt.Errorf("%w: name %q (want %q or %q)", ErrUnknownCodec, name, noneName, zstdName)
	}
}

// checkDecodedSize rejects a decodedSize no frame can have.
func checkDecodedSize(decodedSize int) error {
	if decodedSize < 0 || decodedSize > MaxDecodedBytes {
		return fmt.Errorf("%w: decoded size %d outside [0, %d]", ErrCorrupt, decodedSize, MaxDecodedBytes)
	}
	return nil
}

// checkEncodeSize rejects an input too long for a frame.
func checkEncodeSize(codecName string, src []byte) error {
	if len(src) > MaxDecodedBytes {
		return fmt.Errorf("%w: %s: %d bytes", ErrTooLarge, codecName, len(src))
	}
	return nil
}

// outputBuffer returns dst[:0] when dst can hold capacity bytes, else a new
// empty slice of exactly that capacity.
func outputBuffer(dst []byte, capacity int) []byte {
	if cap(dst) >= capacity {
		return dst[:0]
	}
	return make([]byte, 0, capacity)
}
