package codec

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

const zstdName = "zstd"

// zstdCodec encodes a payload as one zstd frame with
// github.com/klauspost/compress/zstd. It holds no state: the encoder and the
// decoder are process-wide (see sharedZstdEncoder, sharedZstdDecoder).
type zstdCodec struct{}

func (zstdCodec) ID() ID       { return Zstd }
func (zstdCodec) Name() string { return zstdName }

// sharedZstdEncoder is the one encoder of the process, created on first use.
// EncodeAll is safe for concurrent use: it takes one of GOMAXPROCS block
// encoders from the Encoder's internal channel and runs on the caller's
// goroutine. An Encoder made with a nil writer starts no goroutine and needs
// no Close (the stream API, which would, is never used). Memory: each block
// encoder holds 1.25 MiB of match tables from the first EncodeAll on, and 2 MiB
// of history once it has encoded a frame over 128 KiB.
//
// Options:
//   - SpeedDefault (about zstd level 3): the flusher encodes on the commit
//     path, so encode time is commit latency. On the benchmark's order events
//     (2 cores, loaded) it saved 17% of one-record frames and 83% of
//     500-record ones at 140 MB/s; SpeedFastest saved 13% and 83% at 175
//     MB/s; SpeedBetterCompression 21% and 84% at 48 MB/s, three times the
//     commit-path cost for a point or four.
//   - Single segment: the frame header carries the content size (which Decode
//     requires) and a window equal to it, so a frame of 1 KiB to 128 KiB needs
//     no decode headroom (see inspectZstdFrame). The window the encoder
//     matches over stays 8 MiB.
//   - No zstd checksum: the frame's crc32c already covers the stored bytes and
//     is checked on every read; the xxhash would add 4 bytes to every frame
//     and a pass over every payload.
//   - Zero frames: an empty payload is still one frame, so Decode has a single
//     shape to check.
var sharedZstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) { return newZstdEncoder() })

// zstdEncoderWindowBytes is how far back the encoder looks for matches: a
// flusher drain is 1 MiB, and each frame is compressed on its own, so a longer
// window only costs memory (the library keeps twice the window of history per
// block encoder: 16 MiB each at its default of 8 MiB).
const zstdEncoderWindowBytes = 1 << 20

// newZstdEncoder makes an encoder with the options above, and extra (a
// dictionary's).
func newZstdEncoder(extra ...zstd.EOption) (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, append([]zstd.EOption{
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithWindowSize(zstdEncoderWindowBytes),
		zstd.WithSingleSegment(true),
		zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true),
	}, extra...)...)
}

// sharedZstdDecoder is the one decoder of the process, created on first use.
// DecodeAll is safe for concurrent use, up to GOMAXPROCS decodes at once (the
// library's default is 4). A Decoder made with a nil reader starts no
// goroutine and needs no Close (only a stream Reset would start them, and
// Decode never streams). DecodeAll decodes into the buffer it is given and
// keeps its window there, so the decoder's own memory is per block (about
// 128 KiB per concurrent decode, kept for reuse), never per frame.
var sharedZstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) { return newZstdDecoder() })

// newZstdDecoder makes a decoder with the options above, and extra (a
// dictionary's).
func newZstdDecoder(extra ...zstd.DOption) (*zstd.Decoder, error) {
	return zstd.NewReader(nil, append([]zstd.DOption{
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxDecodedBytes),
		zstd.WithDecoderLowmem(true),
	}, extra...)...)
}

// zstdScratchBytes is the capacity of a scratch decode buffer: a 1 MiB frame
// (a full flusher drain) plus one block of headroom.
const zstdScratchBytes = 1<<20 + zstdMaxBlockBytes

// zstdScratchPool holds *[]byte of capacity zstdScratchBytes. A frame whose
// layout needs headroom (see inspectZstdFrame) is decoded into one and copied
// out, so its result is exactly decodedSize long and wide; nothing decoded
// into a scratch buffer is handed out.
var zstdScratchPool sync.Pool

func (zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	if err := checkEncodeSize(zstdName, src); err != nil {
		return dst, err
	}
	encoder, err := sharedZstdEncoder()
	if err != nil {
		return dst, fmt.Errorf("codec: zstd: create encoder: %w", err)
	}
	return encoder.EncodeAll(src, dst), nil
}

func (zstdCodec) Decode(dst, src []byte, decodedSize int) ([]byte, error) {
	if err := checkDecodedSize(decodedSize); err != nil {
		return nil, err
	}
	layout, err := inspectZstdFrame(src, decodedSize)
	if err != nil {
		return nil, err
	}
	if layout.dictionaryID != 0 {
		return nil, fmt.Errorf("%w: zstd frame needs dictionary %d, codec zstd uses none", ErrCorrupt, layout.dictionaryID)
	}
	decoder, err := sharedZstdDecoder()
	if err != nil {
		return nil, fmt.Errorf("codec: zstd: create decoder: %w", err)
	}
	return decodeZstd(decoder, layout, dst, src, decodedSize)
}

// decodeZstd decodes src, whose layout inspectZstdFrame returned, with
// decoder, into dst or a buffer of its own (see Codec.Decode).
func decodeZstd(decoder *zstd.Decoder, layout zstdFrameLayout, dst, src []byte, decodedSize int) ([]byte, error) {
	// From here decodedSize is what the frame says and its blocks can reach,
	// and the buffer handed to the decoder holds decodedSize + headroom, so
	// nothing the frame does can make the decoder grow it.
	bufferBytes := decodedSize + layout.headroomBytes
	if bufferBytes > 0 && (cap(dst) >= bufferBytes || layout.headroomBytes == 0 || bufferBytes > zstdScratchBytes) {
		return decodeZstdInto(decoder, outputBuffer(dst, bufferBytes), src, decodedSize)
	}

	// A small frame that wants headroom (under 1 KiB, or a partial last block),
	// or an empty one (the decoder needs a buffer with some capacity).
	scratch := getZstdScratch()
	defer zstdScratchPool.Put(scratch)
	decoded, err := decodeZstdInto(decoder, (*scratch)[:0], src, decodedSize)
	if err != nil {
		return nil, err
	}
	out := outputBuffer(dst, decodedSize)[:decodedSize]
	copy(out, decoded)
	return out, nil
}

// decodeZstdInto decodes src into buffer, whose capacity inspectZstdFrame has
// shown to be enough, and checks the result.
func decodeZstdInto(decoder *zstd.Decoder, buffer, src []byte, decodedSize int) ([]byte, error) {
	decoded, err := decoder.DecodeAll(src, buffer)
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
	}
	if len(decoded) != decodedSize {
		return nil, fmt.Errorf("%w: zstd frame decoded to %d bytes, expected %d", ErrCorrupt, len(decoded), decodedSize)
	}
	// INVARIANT: the decoder wrote into buffer and did not grow it; if it
	// had, the headroom reasoning in inspectZstdFrame is wrong.
	if decodedSize > 0 && &decoded[0] != &buffer[:1][0] {
		return nil, fmt.Errorf("%w: zstd frame outgrew its %d-byte decode buffer", ErrCorrupt, cap(buffer))
	}
	return decoded, nil
}

func getZstdScratch() *[]byte {
	if scratch, ok := zstdScratchPool.Get().(*[]byte); ok {
		return scratch
	}
	scratch := make([]byte, 0, zstdScratchBytes)
	return &scratch
}
