package codec

import "fmt"

const noneName = "none"

// noneCodec stores payloads as they are. Decode still copies: the caller may
// reuse src (a read-back buffer from a free list) while the result lives on
// in a cache.
type noneCodec struct{}

func (noneCodec) ID() ID       { return None }
func (noneCodec) Name() string { return noneName }

func (noneCodec) Encode(dst, src []byte) ([]byte, error) {
	if err := checkEncodeSize(noneName, src); err != nil {
		return dst, err
	}
	return append(dst, src...), nil
}

func (noneCodec) Decode(dst, src []byte, decodedSize int) ([]byte, error) {
	if err := checkDecodedSize(decodedSize); err != nil {
		return nil, err
	}
	if len(src) != decodedSize {
		return nil, fmt.Errorf("%w: none: %d stored bytes, expected %d", ErrCorrupt, len(src), decodedSize)
	}
	out := outputBuffer(dst, decodedSize)[:decodedSize]
	copy(out, src)
	return out, nil
}
