package codec

import (
	"errors"
	"fmt"
)

const zstdDictName = "zstd-dict"

// ErrNoDictionary is returned by Encode of the zstd-dict codec that ByID
// gives: it has no dictionary to encode with (see WithDictionary).
var ErrNoDictionary = errors.New("codec: zstd-dict: no dictionary to encode with")

// zstdDictCodec stores a payload as one zstd frame compressed with a
// dictionary, whose id the zstd frame header carries (RFC 8878,
// Dictionary_ID): inside the stored bytes, so the frame's crc32c covers it.
// It encodes with encodeWith and decodes a frame with the dictionary the
// frame names, found in dicts or, failing that, encodeWith.
//
// A frame of this codec always names a dictionary, except an empty payload,
// which zstd writes with none (its id 0) and decodes to nothing.
type zstdDictCodec struct {
	encodeWith *Dictionary
	dicts      *DictionarySet
}

// WithDictionary returns the codec that encodes with d (codec id ZstdDict)
// and decodes frames compressed with d or with any dictionary of dicts
// (nil: none).
func WithDictionary(d *Dictionary, dicts *DictionarySet) Codec {
	return zstdDictCodec{encodeWith: d, dicts: dicts}
}

// ForFrame returns the codec that decodes frames stored with id, finding
// dictionaries in dicts (nil: none, so a frame of codec ZstdDict fails with
// ErrDictionaryMissing). It is ByID with dictionaries.
// It allocates nothing: a read decodes frame after frame through it.
func ForFrame(id ID, dicts *DictionarySet) (Codec, error) {
	if id != ZstdDict {
		return ByID(id)
	}
	if dicts == nil {
		return noDictionaries, nil
	}
	return dicts.decodingCodec(), nil
}

// noDictionaries decodes zstd-dict frames with no dictionary at hand: each
// fails with ErrDictionaryMissing.
var noDictionaries Codec = zstdDictCodec{}

func (zstdDictCodec) ID() ID       { return ZstdDict }
func (zstdDictCodec) Name() string { return zstdDictName }

func (c zstdDictCodec) Encode(dst, src []byte) ([]byte, error) {
	if err := checkEncodeSize(zstdDictName, src); err != nil {
		return dst, err
	}
	if c.encodeWith == nil {
		return dst, ErrNoDictionary
	}
	encoder, err := c.encodeWith.encoder()
	if err != nil {
		return dst, fmt.Errorf("codec: zstd-dict: create encoder for dictionary %d: %w", c.encodeWith.id, err)
	}
	return encoder.EncodeAll(src, dst), nil
}

func (c zstdDictCodec) Decode(dst, src []byte, decodedSize int) ([]byte, error) {
	if err := checkDecodedSize(decodedSize); err != nil {
		return nil, err
	}
	layout, err := inspectZstdFrame(src, decodedSize)
	if err != nil {
		return nil, err
	}
	id := layout.dictionaryID
	if id == 0 {
		if decodedSize != 0 {
			return nil, fmt.Errorf("%w: zstd-dict frame of %d bytes names no dictionary", ErrCorrupt, decodedSize)
		}
		return outputBuffer(dst, 0), nil
	}
	d := c.dicts.Lookup(id)
	if d == nil && c.encodeWith != nil && c.encodeWith.id == id {
		d = c.encodeWith
	}
	if d == nil {
		return nil, fmt.Errorf("%w: dictionary %d", ErrDictionaryMissing, id)
	}
	decoder, err := d.decoder()
	if err != nil {
		return nil, fmt.Errorf("codec: zstd-dict: create decoder for dictionary %d: %w", id, err)
	}
	return decodeZstd(decoder, layout, dst, src, decodedSize)
}

// FrameDictionary returns the dictionary id a stored payload of codec
// ZstdDict names in its zstd frame header (0 for none), reading only the
// header. It is for tools that report what a frame needs.
func FrameDictionary(src []byte, decodedSize int) (uint32, error) {
	if err := checkDecodedSize(decodedSize); err != nil {
		return 0, err
	}
	layout, err := inspectZstdFrame(src, decodedSize)
	if err != nil {
		return 0, err
	}
	return layout.dictionaryID, nil
}
