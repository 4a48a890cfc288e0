// Package codec owns the payload codecs of a frame: the Codec interface, the
// codec ids stored in bits 0-2 of the frame flags (0 none, 1 zstd, 2 zstd
// with a dictionary), the process-wide zstd encoder and decoder
// (github.com/klauspost/compress/zstd) they run on, and zstd dictionaries:
// trained from sample payloads (github.com/klauspost/compress/dict), checked
// when parsed, each with its own shared encoder and decoder, and gathered
// by id in a DictionarySet that decodes a frame with the dictionary its
// zstd frame header names. It imports nothing of ours; the frame layout around the
// payload is package wire's, the choice of codec the partition's.
//
// # What a payload is
//
// All records drained in one flush, each as [len:4 BE][record], concatenated.
// The codec turns that into the stored bytes the frame's crc32c covers, and
// back. The frame header stores the payload's size before the codec, at most
// MaxDecodedBytes (256 MiB, the on-disk frame bound); Decode is given that
// size and trusts nothing else.
//
// # Decode aliasing contract
//
// Decoded records point into the frame's decode buffer instead of being
// copied one by one, and that buffer may sit in the frame cache for a long
// time. So Decode:
//   - returns a slice of dst's backing array (when cap(dst) is enough) or of
//     a new allocation, never of src and never of a buffer the codec keeps:
//     what it returns is the caller's for good;
//   - retains neither src nor dst after it returns: the caller may reuse src
//     (a read-back buffer from a free list) at once, and the none codec copies
//     for that reason;
//   - may write anywhere in dst[:cap(dst)].
//
// # Allocation bound
//
// Decode allocates at most decodedSize plus a constant, whatever src says.
// decodedSize outside [0, MaxDecodedBytes] is rejected first. For zstd, the
// frame and block headers are then read without decoding: src must be
// exactly one frame with no dictionary (codec zstd) or naming one the
// codec was given (zstd-dict; a missing one is ErrDictionaryMissing, not
// ErrCorrupt), whose header declares a content size
// equal to decodedSize, whose blocks can produce that many bytes and none
// more than the format allows, with nothing after it. Only then is a buffer
// taken (dst, or a new one of decodedSize bytes).
//
// The decoder checks its output against the content size only after each
// block, so a corrupt frame can write up to one block (128 KiB) past it, and
// into a buffer of exactly decodedSize that would make it reallocate the
// whole buffer. Where the block layout allows that, the buffer gets the
// headroom the layout allows (at most 128 KiB); a frame of at most 1 MiB is
// then decoded into a pooled scratch buffer and copied out, so its result is
// still exactly decodedSize wide. Frames this package writes need headroom
// only under 1 KiB (zstd's smallest window) or when their last block is
// partial. The constant is therefore 128 KiB, plus the pooled scratch buffer
// (1 MiB + 128 KiB) and the decoder's per-block buffers, both reused.
//
// # Goroutines
//
// None. The shared zstd encoder and decoder are made with a nil writer and
// reader and used only through EncodeAll and DecodeAll, which run on the
// caller's goroutine; no Close is needed. TestNoGoroutineLeft checks it.
package codec
