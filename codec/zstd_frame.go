package codec

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Block layout of a zstd frame (RFC 8878, section 3.1.1.2), which
// inspectZstdFrame reads without decoding anything. After the frame header
// come blocks, each a 3-byte little-endian header and its content:
//
//	bit 0       Last_Block
//	bits 1-2    Block_Type: 0 raw, 1 RLE, 2 compressed, 3 reserved
//	bits 3-23   Block_Size
//
//	raw         Block_Size bytes stored, output exactly those bytes
//	RLE         1 byte stored, output Block_Size copies of it
//	compressed  Block_Size bytes stored, output at most blockMax =
//	            min(window, 128 KiB), known only by decoding
//
// After the last block come 4 checksum bytes when the frame header's checksum
// flag is set, and then nothing: we store exactly one frame.
const (
	zstdBlockHeaderBytes    = 3
	zstdChecksumBytes       = 4
	zstdBlockTypeRaw        = 0
	zstdBlockTypeRLE        = 1
	zstdBlockTypeCompressed = 2
	zstdMaxBlockBytes       = 128 << 10 // the format's Block_Maximum_Size
	zstdMinWindowBytes      = 1 << 10   // the format's smallest window
	zstdMinCompressedBytes  = 2         // literals header + sequences header
)

// zstdFrameLayout is what one zstd frame's headers promise about its output.
type zstdFrameLayout struct {
	// headroomBytes is how far past the content size a corrupt frame can make
	// the decoder write before it notices: at most one block. A decode buffer
	// of content size + headroomBytes never has to grow.
	headroomBytes int
	// dictionaryID is the frame header's Dictionary_ID: 0 for none. The
	// caller checks it against its codec.
	dictionaryID uint32
}

// inspectZstdFrame checks that src is exactly one zstd frame that says it
// decodes to decodedSize bytes and whose blocks can add up to that, and
// returns the headroom its decode buffer needs. It reads only headers (3
// bytes per block of up to 128 KiB) and allocates nothing unless it fails.
// The dictionary the frame names is returned, not checked: that is the
// codec's.
//
// Why headroom: the decoder checks the output against the frame's content size
// after each block, so a corrupt frame can write up to one block past it
// before failing. Written into a buffer of exactly decodedSize, that block
// would make append grow (copy) the whole buffer: an allocation the caller
// never asked for. The bound comes from the blocks themselves: raw and RLE
// blocks state their output size, a compressed block writes at most blockMax.
// If all of them together cannot pass decodedSize, no headroom is needed,
// which is the case for every frame of at most 128 KiB and at least 1 KiB
// that our encoder writes.
func inspectZstdFrame(src []byte, decodedSize int) (zstdFrameLayout, error) {
	var header zstd.Header
	blocks, err := header.DecodeAndStrip(src)
	if err != nil {
		return zstdFrameLayout{}, fmt.Errorf("%w: zstd frame header: %w", ErrCorrupt, err)
	}
	switch {
	case header.Skippable:
		return zstdFrameLayout{}, fmt.Errorf("%w: zstd skippable frame, expected a data frame", ErrCorrupt)
	case !header.HasFCS:
		return zstdFrameLayout{}, fmt.Errorf("%w: zstd frame header has no content size", ErrCorrupt)
	case header.FrameContentSize != uint64(decodedSize):
		return zstdFrameLayout{}, fmt.Errorf("%w: zstd frame content size %d, expected %d",
			ErrCorrupt, header.FrameContentSize, decodedSize)
	}

	// The decoder's window for a single-segment frame is the content size,
	// raised to the format's minimum; a block never outputs more than
	// min(window, 128 KiB).
	windowBytes := header.WindowSize
	if header.SingleSegment {
		windowBytes = max(header.FrameContentSize, zstdMinWindowBytes)
	}
	blockMax := int64(min(windowBytes, zstdMaxBlockBytes))

	// exactBytes is the output of raw and RLE blocks, maxBytes that plus the
	// most every compressed block can output. Both are at most
	// len(src)/3 * 128 KiB, far inside int64.
	var exactBytes, maxBytes int64
	for blockIndex := 0; ; blockIndex++ {
		if len(blocks) < zstdBlockHeaderBytes {
			return zstdFrameLayout{}, fmt.Errorf("%w: zstd block %d: header truncated", ErrCorrupt, blockIndex)
		}
		blockHeader := uint32(blocks[0]) | uint32(blocks[1])<<8 | uint32(blocks[2])<<16
		blocks = blocks[zstdBlockHeaderBytes:]
		last := blockHeader&1 != 0
		blockType := (blockHeader >> 1) & 3
		blockSize := int64(blockHeader >> 3)

		var storedBytes int64
		switch blockType {
		case zstdBlockTypeRaw:
			storedBytes = blockSize
			exactBytes += blockSize
			maxBytes += blockSize
		case zstdBlockTypeRLE:
			storedBytes = 1
			exactBytes += blockSize
			maxBytes += blockSize
		case zstdBlockTypeCompressed:
			if blockSize < zstdMinCompressedBytes {
				return zstdFrameLayout{}, fmt.Errorf("%w: zstd block %d: compressed block of %d bytes", ErrCorrupt, blockIndex, blockSize)
			}
			storedBytes = blockSize
			maxBytes += blockMax
		default:
			return zstdFrameLayout{}, fmt.Errorf("%w: zstd block %d: reserved block type", ErrCorrupt, blockIndex)
		}
		if blockSize > blockMax {
			return zstdFrameLayout{}, fmt.Errorf("%w: zstd block %d: size %d above the block maximum %d",
				ErrCorrupt, blockIndex, blockSize, blockMax)
		}
		if int64(len(blocks)) < storedBytes {
			return zstdFrameLayout{}, fmt.Errorf("%w: zstd block %d: %d bytes stored, %d left in input",
				ErrCorrupt, blockIndex, storedBytes, len(blocks))
		}
		blocks = blocks[storedBytes:]
		if exactBytes > int64(decodedSize) {
			return zstdFrameLayout{}, fmt.Errorf("%w: zstd blocks 0-%d hold %d bytes, content size is %d",
				ErrCorrupt, blockIndex, exactBytes, decodedSize)
		}
		if last {
			break
		}
	}
	if header.HasCheckSum {
		if len(blocks) < zstdChecksumBytes {
			return zstdFrameLayout{}, fmt.Errorf("%w: zstd frame checksum truncated", ErrCorrupt)
		}
		blocks = blocks[zstdChecksumBytes:]
	}
	if len(blocks) != 0 {
		return zstdFrameLayout{}, fmt.Errorf("%w: %d bytes after the zstd frame", ErrCorrupt, len(blocks))
	}
	if maxBytes < int64(decodedSize) {
		return zstdFrameLayout{}, fmt.Errorf("%w: zstd blocks hold at most %d bytes, content size is %d",
			ErrCorrupt, maxBytes, decodedSize)
	}
	return zstdFrameLayout{headroomBytes: int(min(maxBytes-int64(decodedSize), blockMax)), dictionaryID: header.DictionaryID}, nil
}
