package wire

import "errors"

// Sentinel errors. Every error this package returns wraps exactly one of
// them with %w and says what was wrong (and, where the package knows it,
// where: a record index, a byte position, a slot). Callers add the file and
// its position in the file, which this package never sees.
var (
	// ErrTruncated: not all bytes of the thing are present. The buffer ends
	// before a frame header, before the end of the stored payload the header
	// announces, or before the end of a consumer.ahead slot. At the tail of
	// an active segment this is what a torn write looks like.
	ErrTruncated = errors.New("wire: truncated")

	// ErrCorrupt: the bytes are present but wrong: bad magic, CRC mismatch,
	// bits set that the format never writes, impossible sizes or counts,
	// malformed structure inside a CRC-checked frame, a file of the wrong
	// length.
	ErrCorrupt = errors.New("wire: corrupt")

	// ErrTooLarge: an encoder was asked to write something past a bound of
	// the format (MaxFrameBytes, MaxRecordBytes, MaxKeyBytes, int32 record
	// counts).
	ErrTooLarge = errors.New("wire: too large")

	// ErrInvalidInput: an encoder was asked to write something the format
	// cannot represent and that is not a size bound: a negative offset, a
	// record count below one, an unsorted acked-ahead set, an invalid
	// incarnation id. Always a bug in the caller.
	ErrInvalidInput = errors.New("wire: invalid input")

	// ErrBadName: a string is not one of the names the format defines
	// (segment file, partition directory, topic, incarnation id). A
	// directory listing holds other entries too (hwm, temporary files), so a
	// name that does not parse is not by itself corruption.
	ErrBadName = errors.New("wire: bad name")

	// ErrForeignIncarnation: a consumer.ahead slot is intact but was written
	// for another topic incarnation than the one the caller expects.
	ErrForeignIncarnation = errors.New("wire: slot of another incarnation")
)
