package wire

import (
	"encoding/binary"
	"fmt"
)

// OffsetFileSize is the size of the hwm and consumer.offset files: one
// big-endian int64. Part of the on-disk format.
const OffsetFileSize = 8

// EncodeOffsetFile is the content of an hwm or consumer.offset file holding
// v. A negative v is ErrInvalidInput: no offset is negative.
func EncodeOffsetFile(v int64) ([OffsetFileSize]byte, error) {
	var b [OffsetFileSize]byte
	if v < 0 {
		return b, fmt.Errorf("%w: offset file: negative value %d", ErrInvalidInput, v)
	}
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return b, nil
}

// DecodeOffsetFile reads an hwm or consumer.offset file's content. An empty
// file holds no value (present is false, err nil): the hwm file is emptied
// before a log's first advance, and a crash between create and first write
// leaves an empty consumer.offset. Eight bytes hold the value; a negative
// value, or any other length, is ErrCorrupt.
//
// The format has no checksum, so a bit flip that leaves the value
// non-negative decodes as a valid value: callers clamp it (by the record
// tail, by the hwm, by consumer.ahead's frontier) before trusting it.
func DecodeOffsetFile(b []byte) (v int64, present bool, err error) {
	switch len(b) {
	case 0:
		return 0, false, nil
	case OffsetFileSize:
	default:
		return 0, false, fmt.Errorf("%w: offset file: %d bytes, want 0 or %d", ErrCorrupt, len(b), OffsetFileSize)
	}
	v = int64(binary.BigEndian.Uint64(b))
	if v < 0 {
		return 0, false, fmt.Errorf("%w: offset file: negative value %d", ErrCorrupt, v)
	}
	return v, true, nil
}
