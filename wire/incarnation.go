package wire

import (
	"encoding/hex"
	"fmt"
	"io"
)

// Incarnation constants. Part of the on-disk format.
const (
	// IncarnationIDLen is the length of an incarnation id: 16 lower-case
	// hex characters, the hex form of 8 bytes.
	IncarnationIDLen = 16
	// incarnationBytes is the length of an incarnation id's binary form.
	incarnationBytes = 8
)

// IncarnationID identifies one incarnation of a topic (one create of the
// name). A valid id is 16 lower-case hex characters, not all zeros. The
// empty IncarnationID means "no id" (a topic record that predates ids); its
// binary form is eight zero bytes, which is why the all-zero id is reserved.
type IncarnationID string

// ParseIncarnationID checks that s is a valid incarnation id. ErrBadName
// otherwise.
func ParseIncarnationID(s string) (IncarnationID, error) {
	if len(s) != IncarnationIDLen {
		return "", fmt.Errorf("%w: incarnation id %.32q: %d characters, want %d", ErrBadName, s, len(s), IncarnationIDLen)
	}
	zero := true
	for i := range len(s) {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", fmt.Errorf("%w: incarnation id %q: character %d is not lower-case hex", ErrBadName, s, i)
		}
		zero = zero && c == '0'
	}
	if zero {
		return "", fmt.Errorf("%w: incarnation id %q: all zeros is reserved for \"no id\"", ErrBadName, s)
	}
	return IncarnationID(s), nil
}

// NewIncarnationID draws a new id from 8 bytes of random. Callers pass
// crypto/rand.Reader. A reader that returns eight zero bytes is refused
// rather than retried: from a real random source that is a 2^-64 event.
func NewIncarnationID(random io.Reader) (IncarnationID, error) {
	var b [incarnationBytes]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", fmt.Errorf("new incarnation id: read random: %w", err)
	}
	if b == ([incarnationBytes]byte{}) {
		return "", fmt.Errorf("%w: new incarnation id: random source returned eight zero bytes", ErrInvalidInput)
	}
	return IncarnationIDFromBytes(b), nil
}

// IncarnationIDFromBytes is the id whose binary form is b; eight zero bytes
// give the empty id ("no id").
func IncarnationIDFromBytes(b [8]byte) IncarnationID {
	if b == ([incarnationBytes]byte{}) {
		return ""
	}
	return IncarnationID(hex.EncodeToString(b[:]))
}

// Bytes is the binary form of id: the 8 bytes its hex spells, or eight
// zeros for the empty id. ErrBadName when id is neither valid nor empty (an
// id made by conversion instead of ParseIncarnationID).
func (id IncarnationID) Bytes() ([8]byte, error) {
	var b [incarnationBytes]byte
	if id == "" {
		return b, nil
	}
	if _, err := ParseIncarnationID(string(id)); err != nil {
		return b, err
	}
	hex.Decode(b[:], []byte(id)) // cannot fail: checked above
	return b, nil
}

// EncodeIncarnationMarker is the content of a topic's incarnation marker
// file: the id's 16 hex characters and a newline. The empty id has no
// marker, so it is ErrInvalidInput like any invalid id.
func EncodeIncarnationMarker(id IncarnationID) ([]byte, error) {
	if _, err := ParseIncarnationID(string(id)); err != nil {
		return nil, fmt.Errorf("%w: incarnation marker: %s", ErrInvalidInput, err)
	}
	return append([]byte(id), '\n'), nil
}

// DecodeIncarnationMarker reads a marker file's content: exactly 16
// lower-case hex characters (not all zeros), optionally followed by one
// "\n". Anything else, an empty file included, is ErrCorrupt.
func DecodeIncarnationMarker(b []byte) (IncarnationID, error) {
	text := b
	if len(text) == IncarnationIDLen+1 && text[IncarnationIDLen] == '\n' {
		text = text[:IncarnationIDLen]
	}
	if len(text) != IncarnationIDLen {
		return "", fmt.Errorf("%w: incarnation marker: %d bytes, want %d and an optional newline", ErrCorrupt, len(b), IncarnationIDLen)
	}
	id, err := ParseIncarnationID(string(text))
	if err != nil {
		return "", fmt.Errorf("%w: incarnation marker: %s", ErrCorrupt, err)
	}
	return id, nil
}
