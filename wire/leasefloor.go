package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// consumer.lease constants. Part of the on-disk format; the layout is
// drawn in doc.go.
const (
	// LeaseFloorMagic opens a consumer.lease file.
	LeaseFloorMagic = "NRLF"
	// LeaseFloorVersion is the layout version this package reads and
	// writes.
	LeaseFloorVersion = 1
	// LeaseFloorFileSize is the size of a consumer.lease file, which is
	// replaced whole (a temporary file renamed over it).
	LeaseFloorFileSize = 20
	// MaxLeaseID bounds every lease id: 2^53, so an id is exact in any
	// JSON parser (a JavaScript number among them).
	MaxLeaseID = 1 << 53

	leaseFloorVersionAt = 4
	leaseFloorValueAt   = 8
	leaseFloorCRCAt     = 16
)

// EncodeLeaseFloor is the content of a consumer.lease file holding floor:
// every lease id ever given for the partition is at most floor. A floor
// over MaxLeaseID is ErrInvalidInput.
func EncodeLeaseFloor(floor uint64) ([LeaseFloorFileSize]byte, error) {
	var b [LeaseFloorFileSize]byte
	if floor > MaxLeaseID {
		return b, fmt.Errorf("%w: consumer.lease: floor %d over %d", ErrInvalidInput, floor, uint64(MaxLeaseID))
	}
	copy(b[:], LeaseFloorMagic)
	b[leaseFloorVersionAt] = LeaseFloorVersion
	binary.BigEndian.PutUint64(b[leaseFloorValueAt:], floor)
	binary.BigEndian.PutUint32(b[leaseFloorCRCAt:], crc32.Checksum(b[:leaseFloorCRCAt], castagnoli))
	return b, nil
}

// DecodeLeaseFloor reads a consumer.lease file. An empty file holds no
// floor (present false, err nil): a crash between its create and its
// first write. Any other length, the magic, the checksum, the version,
// reserved bytes that are not zero or a floor over MaxLeaseID is
// ErrCorrupt.
func DecodeLeaseFloor(b []byte) (floor uint64, present bool, err error) {
	switch len(b) {
	case 0:
		return 0, false, nil
	case LeaseFloorFileSize:
	default:
		return 0, false, fmt.Errorf("%w: consumer.lease: %d bytes, want 0 or %d", ErrCorrupt, len(b), LeaseFloorFileSize)
	}
	if string(b[:len(LeaseFloorMagic)]) != LeaseFloorMagic {
		return 0, false, fmt.Errorf("%w: consumer.lease: magic %q, want %q", ErrCorrupt, b[:len(LeaseFloorMagic)], LeaseFloorMagic)
	}
	if got, want := crc32.Checksum(b[:leaseFloorCRCAt], castagnoli), binary.BigEndian.Uint32(b[leaseFloorCRCAt:]); got != want {
		return 0, false, fmt.Errorf("%w: consumer.lease: crc32c 0x%08x, file says 0x%08x", ErrCorrupt, got, want)
	}
	if v := b[leaseFloorVersionAt]; v != LeaseFloorVersion {
		return 0, false, fmt.Errorf("%w: consumer.lease: version %d, want %d", ErrCorrupt, v, LeaseFloorVersion)
	}
	for _, c := range b[leaseFloorVersionAt+1 : leaseFloorValueAt] {
		if c != 0 {
			return 0, false, fmt.Errorf("%w: consumer.lease: reserved bytes not zero", ErrCorrupt)
		}
	}
	floor = binary.BigEndian.Uint64(b[leaseFloorValueAt:])
	if floor > MaxLeaseID {
		return 0, false, fmt.Errorf("%w: consumer.lease: floor %d over %d", ErrCorrupt, floor, uint64(MaxLeaseID))
	}
	return floor, true, nil
}
