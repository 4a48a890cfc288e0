package wire

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Payload framing constants. Part of the on-disk format.
const (
	// RecordLenSize is the size of the big-endian length that precedes every
	// record inside a frame's uncompressed payload.
	RecordLenSize = 4
	// MaxRecordBytes is the largest record that fits in a frame under every
	// codec: a frame of codec none holds the header, one length prefix and
	// the record within MaxFrameBytes.
	MaxRecordBytes = MaxFrameBytes - FrameHeaderSize - RecordLenSize
)

// RecordFramingSize is the number of payload bytes a record of recordLen
// bytes takes: its length prefix plus the record.
func RecordFramingSize(recordLen int) int { return RecordLenSize + recordLen }

// EncodedPayloadSize is the size of the uncompressed payload holding records.
func EncodedPayloadSize(records [][]byte) int {
	size := 0
	for _, record := range records {
		size += RecordFramingSize(len(record))
	}
	return size
}

// AppendRecordFrame appends one record to a payload: its 4-byte big-endian
// length, then its bytes. A record longer than MaxRecordBytes is ErrTooLarge
// and dst is returned unchanged.
func AppendRecordFrame(dst, record []byte) ([]byte, error) {
	if len(record) > MaxRecordBytes {
		return dst, fmt.Errorf("%w: record of %d bytes over the %d-byte record bound", ErrTooLarge, len(record), MaxRecordBytes)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(record)))
	return append(dst, record...), nil
}

// CheckPayload verifies that payload is exactly count length-prefixed
// records: every length within the bytes left, nothing left over. A
// reader that walks a payload with CutRecord calls it, when a cut fails
// or bytes are left over, to say what is wrong.
func CheckPayload(payload []byte, count int) error {
	if count < 0 {
		return fmt.Errorf("%w: payload: negative record count %d", ErrCorrupt, count)
	}
	if count > len(payload)/RecordLenSize {
		return fmt.Errorf("%w: payload: %d records need at least %d bytes, payload has %d", ErrCorrupt, count, int64(count)*RecordLenSize, len(payload))
	}
	pos := 0
	for i := range count {
		if len(payload)-pos < RecordLenSize {
			return fmt.Errorf("%w: payload: record %d of %d: length prefix at byte %d runs past the %d-byte payload", ErrCorrupt, i, count, pos, len(payload))
		}
		recordLen := binary.BigEndian.Uint32(payload[pos:])
		pos += RecordLenSize
		if uint64(recordLen) > uint64(len(payload)-pos) {
			return fmt.Errorf("%w: payload: record %d of %d at byte %d: length %d, %d bytes left", ErrCorrupt, i, count, pos-RecordLenSize, recordLen, len(payload)-pos)
		}
		pos += int(recordLen)
	}
	if pos != len(payload) {
		return fmt.Errorf("%w: payload: %d bytes left after %d records", ErrCorrupt, len(payload)-pos, count)
	}
	return nil
}

// OnlyRecord returns the record of a payload that must hold exactly one:
// RecordReader's Reset and Next for a count of 1, with its errors.
func OnlyRecord(payload []byte) ([]byte, error) {
	if len(payload) < RecordLenSize || uint64(binary.BigEndian.Uint32(payload)) != uint64(len(payload)-RecordLenSize) {
		return nil, CheckPayload(payload, 1) // says what is wrong
	}
	return payload[RecordLenSize:len(payload):len(payload)], nil
}

// CutRecord splits the length-prefixed record at the start of b from the
// bytes after it (the record's capacity capped at its length), or reports
// false when b ends before the length or the record: a walk of a payload
// in one pass, for a reader that discards what it took when a later cut
// fails. Small enough to inline.
func CutRecord(b []byte) (record, rest []byte, ok bool) {
	if len(b) < RecordLenSize {
		return nil, b, false
	}
	n := uint64(binary.BigEndian.Uint32(b))
	if n > uint64(len(b)-RecordLenSize) {
		return nil, b, false
	}
	end := RecordLenSize + int(n)
	return b[RecordLenSize:end:end], b[end:], true
}

// RecordReader walks the records of an uncompressed payload without
// allocating. Reset checks the whole structure first, so a malformed payload
// yields no record at all, never a prefix of one.
//
//   - After a successful Reset, payload[pos:] holds exactly remaining
//     well-formed records and nothing else.
//   - After a failed Reset, remaining is 0.
//
// The zero value holds no records.
type RecordReader struct {
	payload   []byte
	pos       int // byte position of the next record's length prefix
	remaining int // records not yet returned by Next
}

// Reset points the reader at payload, which must hold exactly count
// records. It returns ErrCorrupt (and leaves the reader empty) when a length
// runs past the payload, count cannot fit, or bytes are left after the last
// record.
func (r *RecordReader) Reset(payload []byte, count int) error {
	*r = RecordReader{}
	if err := CheckPayload(payload, count); err != nil {
		return err
	}
	*r = RecordReader{payload: payload, remaining: count}
	return nil
}

// Next returns the next record, pointing into the payload (capacity capped
// at its length, so appending to it cannot overwrite the next record), or
// ok=false when every record has been returned.
func (r *RecordReader) Next() (record []byte, ok bool) {
	if r.remaining == 0 {
		return nil, false
	}
	// INVARIANT: Reset checked every length, so these slices are in bounds.
	recordLen := int(binary.BigEndian.Uint32(r.payload[r.pos:]))
	start := r.pos + RecordLenSize
	end := start + recordLen
	r.pos = end
	r.remaining--
	return r.payload[start:end:end], true
}

// Remaining is the number of records Next has yet to return.
func (r *RecordReader) Remaining() int { return r.remaining }

// SplitRecords appends to dst the count records of payload, each pointing
// into payload. It checks the whole payload before growing dst, so a
// corrupt count never drives an allocation. On error dst is returned
// unchanged.
func SplitRecords(dst [][]byte, payload []byte, count int) ([][]byte, error) {
	var r RecordReader
	if err := r.Reset(payload, count); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, count) // count <= len(payload)/4: bounded by bytes present
	for {
		record, ok := r.Next()
		if !ok {
			return dst, nil
		}
		dst = append(dst, record)
	}
}
