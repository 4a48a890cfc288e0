package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// consumer.acked constants. Part of the on-disk format; the layout is
// drawn in doc.go.
const (
	// AckedMagic opens a consumer.acked file.
	AckedMagic = "NRCK"
	// AckedVersion is the layout version this package reads and writes.
	AckedVersion = 1
	// AckedMaxOffsets bounds the offsets a consumer.acked file holds: the
	// largest acked-ahead set a partition keeps.
	AckedMaxOffsets = 100000
	// AckedMaxFileSize bounds a consumer.acked file: its header, the most
	// offsets at the longest uvarint each, and its checksum. A reader reads
	// at most this much.
	AckedMaxFileSize = ackedListAt + AckedMaxOffsets*binary.MaxVarintLen64 + 4

	ackedVersionAt     = 4
	ackedReservedAt    = 5
	ackedSequenceAt    = 8
	ackedIncarnationAt = 16
	ackedFrontierAt    = 24
	ackedCountAt       = 32
	ackedListLenAt     = 36
	ackedListAt        = 40
)

// AckedRecord is a consumer.acked record: a partition's whole acked-ahead
// set, as a clean close left it, for the record of consumer.ahead whose
// slot could hold only the set's lowest offsets.
//   - Frontier >= 0 is the frontier the set was acked above.
//   - Ahead is strictly increasing, every element > Frontier, at most
//     AckedMaxOffsets of them.
//   - Sequence is the sequence of the consumer.ahead record written with
//     it; Incarnation the topic incarnation (empty when the record has
//     none).
type AckedRecord struct {
	Sequence    uint64
	Incarnation IncarnationID
	Frontier    int64
	Ahead       []int64
}

// EncodeAckedFile returns the content of a consumer.acked file holding
// rec. rec breaking an AckedRecord invariant, or an invalid incarnation
// id, is ErrInvalidInput.
func EncodeAckedFile(rec AckedRecord) ([]byte, error) {
	incarnation, err := rec.Incarnation.Bytes()
	if err != nil {
		return nil, fmt.Errorf("%w: consumer.acked: %s", ErrInvalidInput, err)
	}
	if rec.Frontier < 0 {
		return nil, fmt.Errorf("%w: consumer.acked: negative frontier %d", ErrInvalidInput, rec.Frontier)
	}
	if len(rec.Ahead) > AckedMaxOffsets {
		return nil, fmt.Errorf("%w: consumer.acked: %d offsets, at most %d", ErrInvalidInput, len(rec.Ahead), AckedMaxOffsets)
	}
	b := make([]byte, ackedListAt, ackedListAt+len(rec.Ahead)*2+4)
	previous := rec.Frontier
	for i, offset := range rec.Ahead {
		if offset <= previous {
			return nil, fmt.Errorf("%w: consumer.acked: offset %d (index %d) not above %d", ErrInvalidInput, offset, i, previous)
		}
		b = binary.AppendUvarint(b, uint64(offset-previous)-1)
		previous = offset
	}
	copy(b, AckedMagic)
	b[ackedVersionAt] = AckedVersion
	binary.BigEndian.PutUint64(b[ackedSequenceAt:], rec.Sequence)
	copy(b[ackedIncarnationAt:], incarnation[:])
	binary.BigEndian.PutUint64(b[ackedFrontierAt:], uint64(rec.Frontier))
	binary.BigEndian.PutUint32(b[ackedCountAt:], uint32(len(rec.Ahead)))
	binary.BigEndian.PutUint32(b[ackedListLenAt:], uint32(len(b)-ackedListAt))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// DecodeAckedFile decodes a consumer.acked file. Every defect is
// ErrCorrupt (a torn file too: it is written whole and renamed into
// place, so a short one is damage): length, magic, checksum, version,
// reserved bytes, a negative frontier, a count over AckedMaxOffsets or
// over the list's bytes, a list length other than the bytes present, a
// malformed or non-minimal uvarint, an offset past int64, list bytes left
// over. It allocates at most one slice of the count it checked.
func DecodeAckedFile(b []byte) (AckedRecord, error) {
	if len(b) < ackedListAt+4 {
		return AckedRecord{}, fmt.Errorf("%w: consumer.acked: %d bytes, shorter than its header", ErrCorrupt, len(b))
	}
	if len(b) > AckedMaxFileSize {
		return AckedRecord{}, fmt.Errorf("%w: consumer.acked: %d bytes, longer than %d", ErrCorrupt, len(b), AckedMaxFileSize)
	}
	if string(b[:len(AckedMagic)]) != AckedMagic {
		return AckedRecord{}, fmt.Errorf("%w: consumer.acked: magic %q, want %q", ErrCorrupt, b[:len(AckedMagic)], AckedMagic)
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(b[len(body):]); got != want {
		return AckedRecord{}, fmt.Errorf("%w: consumer.acked: crc32c 0x%08x, file says 0x%08x", ErrCorrupt, got, want)
	}
	if v := b[ackedVersionAt]; v != AckedVersion {
		return AckedRecord{}, fmt.Errorf("%w: consumer.acked: version %d, want %d", ErrCorrupt, v, AckedVersion)
	}
	for _, c := range b[ackedReservedAt:ackedSequenceAt] {
		if c != 0 {
			return AckedRecord{}, fmt.Errorf("%w: consumer.acked: reserved bytes not zero", ErrCorrupt)
		}
	}
	rec := AckedRecord{
		Sequence:    binary.BigEndian.Uint64(b[ackedSequenceAt:]),
		Incarnation: IncarnationIDFromBytes([8]byte(b[ackedIncarnationAt:ackedFrontierAt])),
		Frontier:    int64(binary.BigEndian.Uint64(b[ackedFrontierAt:])),
	}
	if rec.Frontier < 0 {
		return AckedRecord{}, fmt.Errorf("%w: consumer.acked: negative frontier %d", ErrCorrupt, rec.Frontier)
	}
	count := binary.BigEndian.Uint32(b[ackedCountAt:])
	list := body[ackedListAt:]
	if listLen := binary.BigEndian.Uint32(b[ackedListLenAt:]); int64(listLen) != int64(len(list)) {
		return AckedRecord{}, fmt.Errorf("%w: consumer.acked: list length %d, %d bytes present", ErrCorrupt, listLen, len(list))
	}
	if count > AckedMaxOffsets || int64(count) > int64(len(list)) { // every uvarint takes a byte at least
		return AckedRecord{}, fmt.Errorf("%w: consumer.acked: %d offsets in %d list bytes", ErrCorrupt, count, len(list))
	}
	var err error
	if rec.Ahead, err = decodeGaps(list, int(count), rec.Frontier); err != nil {
		return AckedRecord{}, fmt.Errorf("%w: consumer.acked: %s", ErrCorrupt, err)
	}
	return rec, nil
}
