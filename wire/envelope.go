package wire

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Keyed envelope constants. Part of the on-disk format.
const (
	// EnvelopeVersion is the first byte of every envelope.
	EnvelopeVersion = 0x02
	// MaxKeyBytes bounds a record key, on write and on read. Keys route and
	// identify records; 64 KiB is far above any routing key while keeping
	// the key-length uvarint at three bytes at most. Raising it later is
	// safe for new readers only: an older reader would call a longer key
	// corrupt.
	MaxKeyBytes = 64 << 10
	// envelopeTimeSize is the size of committedAtUnixMs.
	envelopeTimeSize = 8
)

// Envelope is a decoded keyed envelope. Key and Payload point into the
// buffer it was parsed from, capacities capped at their lengths.
//   - len(Key) <= MaxKeyBytes; an empty Key means the record has no key.
type Envelope struct {
	Key               []byte
	CommittedAtUnixMs int64
	Payload           []byte
}

// EnvelopeSize is the encoded size of an envelope with a key of keyLen bytes
// and a payload of payloadLen bytes.
func EnvelopeSize(keyLen, payloadLen int) int {
	return 1 + uvarintLen(uint64(keyLen)) + keyLen + envelopeTimeSize + payloadLen
}

// AppendEnvelope appends [0x02][uvarint len(key)][key][committedAtUnixMs
// 8B BE][payload] to dst. A key over MaxKeyBytes, or an envelope that would
// not fit in a frame (MaxRecordBytes), is ErrTooLarge; dst is then returned
// unchanged.
func AppendEnvelope(dst, key []byte, committedAtUnixMs int64, payload []byte) ([]byte, error) {
	if len(key) > MaxKeyBytes {
		return dst, fmt.Errorf("%w: envelope: key of %d bytes over the %d-byte key bound", ErrTooLarge, len(key), MaxKeyBytes)
	}
	if len(payload) > MaxRecordBytes { // keeps EnvelopeSize from overflowing
		return dst, fmt.Errorf("%w: envelope: payload of %d bytes over the %d-byte record bound", ErrTooLarge, len(payload), MaxRecordBytes)
	}
	size := EnvelopeSize(len(key), len(payload))
	if size > MaxRecordBytes {
		return dst, fmt.Errorf("%w: envelope of %d bytes over the %d-byte record bound", ErrTooLarge, size, MaxRecordBytes)
	}
	dst = slices.Grow(dst, size)
	dst = append(dst, EnvelopeVersion)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(committedAtUnixMs))
	return append(dst, payload...), nil
}

// AppendEnvelopeRecord appends one record of an uncompressed payload whose
// record is an envelope: the envelope's length (RecordLenSize bytes, as
// AppendRecordFrame writes it), then the envelope as AppendEnvelope lays
// it out, so a writer builds a frame's payload from keys and values in one
// pass. It returns the envelope's bytes within dst. Errors are
// AppendEnvelope's; dst is then returned unchanged.
func AppendEnvelopeRecord(dst, key []byte, committedAtUnixMs int64, payload []byte) (out, env []byte, err error) {
	start := len(dst)
	out, err = AppendEnvelope(binary.BigEndian.AppendUint32(dst, 0), key, committedAtUnixMs, payload)
	if err != nil {
		return dst[:start], nil, err
	}
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-RecordLenSize))
	return out, out[start+RecordLenSize : len(out) : len(out)], nil
}

// envelopeTimeOffset returns the position of committedAtUnixMs in env and
// the key's bounds, after checking everything before the payload.
func envelopeTimeOffset(env []byte) (keyStart, timeAt int, err error) {
	if len(env) == 0 {
		return 0, 0, fmt.Errorf("%w: envelope: empty record", ErrCorrupt)
	}
	if env[0] != EnvelopeVersion {
		return 0, 0, fmt.Errorf("%w: envelope: version 0x%02x, want 0x%02x", ErrCorrupt, env[0], EnvelopeVersion)
	}
	keyLen, n := uint64(0), 1
	if len(env) > 1 && env[1] < 0x80 { // a key under 128 bytes, or none: a one-byte length, minimal
		keyLen = uint64(env[1])
	} else if keyLen, n, err = readMinimalUvarint(env[1:]); err != nil {
		return 0, 0, fmt.Errorf("%w: envelope: key length: %s", ErrCorrupt, err)
	}
	if keyLen > MaxKeyBytes {
		return 0, 0, fmt.Errorf("%w: envelope: key length %d over the %d-byte key bound", ErrCorrupt, keyLen, MaxKeyBytes)
	}
	keyStart = 1 + n
	if keyLen > uint64(len(env)-keyStart) {
		return 0, 0, fmt.Errorf("%w: envelope: key length %d, %d bytes left", ErrCorrupt, keyLen, len(env)-keyStart)
	}
	timeAt = keyStart + int(keyLen)
	if len(env)-timeAt < envelopeTimeSize {
		return 0, 0, fmt.Errorf("%w: envelope: commit time needs %d bytes, %d left", ErrCorrupt, envelopeTimeSize, len(env)-timeAt)
	}
	return keyStart, timeAt, nil
}

// ParseEnvelope decodes the envelope that is the whole of b. An envelope
// lives inside a CRC-checked frame, so every defect is ErrCorrupt, a short
// one included: an unknown version, a malformed, overlong or non-minimal key
// length, a key past MaxKeyBytes or past the end of b, fewer than 8 bytes
// for the commit time. Everything after the commit time is the payload.
func ParseEnvelope(b []byte) (Envelope, error) {
	key, committedAtUnixMs, payload, err := SplitEnvelope(b)
	return Envelope{Key: key, CommittedAtUnixMs: committedAtUnixMs, Payload: payload}, err
}

// SplitEnvelope is ParseEnvelope with the fields returned apart, for a
// reader's loop over many records: the compiler keeps them in registers,
// where an Envelope returned whole is copied through memory.
func SplitEnvelope(b []byte) (key []byte, committedAtUnixMs int64, payload []byte, err error) {
	keyStart, timeAt, err := envelopeTimeOffset(b)
	if err != nil {
		return nil, 0, nil, err
	}
	payloadAt := timeAt + envelopeTimeSize
	return b[keyStart:timeAt:timeAt], int64(binary.BigEndian.Uint64(b[timeAt:])), b[payloadAt:len(b):len(b)], nil
}

// SetEnvelopeCommitTime overwrites the commit time of the encoded envelope
// env in place. The partition uses it to raise a record's commit time to the
// newest one the partition has seen, under its produce lock.
func SetEnvelopeCommitTime(env []byte, committedAtUnixMs int64) error {
	_, timeAt, err := envelopeTimeOffset(env)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint64(env[timeAt:], uint64(committedAtUnixMs))
	return nil
}

// readMinimalUvarint reads a uvarint from the start of b and rejects what
// binary.Uvarint alone would accept or mis-report: an encoding that runs off
// the end of b, one longer than 10 bytes or past 64 bits, and a non-minimal
// one (a last byte of 0x00 after a continuation byte), which no writer of
// this format produces. One value, one encoding.
func readMinimalUvarint(b []byte) (value uint64, n int, err error) {
	value, n = binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, 0, fmt.Errorf("uvarint runs past the end (%d bytes)", len(b))
	case n < 0:
		return 0, 0, fmt.Errorf("uvarint longer than %d bytes or over 64 bits", binary.MaxVarintLen64)
	case n > 1 && b[n-1] == 0:
		return 0, 0, fmt.Errorf("non-minimal %d-byte uvarint for %d", n, value)
	}
	return value, n, nil
}

// uvarintLen is the length of the minimal uvarint encoding of v.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
