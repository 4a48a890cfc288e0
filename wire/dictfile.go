package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// A topic's zstd dictionary is kept in the topic directory as one file per
// dictionary, named DictionaryFileName(id):
//
//	offset 0   magic      4B  "NZD1"
//	offset 4   id         4B  BE, the dictionary's id (as its own header says)
//	offset 8   trainedAt  8B  BE, Unix ms when it was trained (newest is used)
//	offset 16  length     4B  BE, dictionary bytes, <= MaxDictionaryFileBytes
//	offset 20  crc32c     4B  Castagnoli over bytes [4, 20) and the dictionary
//	offset 24  dictionary     zstd dictionary format (RFC 8878)
//
// The file is written once, atomically (vfs.WriteFileAtomic), and never
// changed: a dictionary frames name must read back as it was.
const (
	// DictionaryFileHeaderSize is the fixed part of a dictionary file.
	DictionaryFileHeaderSize = 24
	// MaxDictionaryFileBytes bounds a dictionary's bytes: 1 MiB, the codec's
	// bound.
	MaxDictionaryFileBytes = 1 << 20
	// dictionaryFilePrefix and dictionaryIDDigits spell a dictionary file's
	// name: "dictionary." and ten zero-padded decimal digits.
	dictionaryFilePrefix = "dictionary."
	dictionaryIDDigits   = 10
)

var dictionaryFileMagic = [4]byte{'N', 'Z', 'D', '1'}

// DictionaryFile is a dictionary file's content.
type DictionaryFile struct {
	ID          uint32
	TrainedAtMs int64
	Dictionary  []byte
}

// DictionaryFileName is the name of the file holding dictionary id. id 0 is
// ErrInvalidInput: it means "no dictionary".
func DictionaryFileName(id uint32) (string, error) {
	if id == 0 {
		return "", fmt.Errorf("%w: dictionary file name: id 0", ErrInvalidInput)
	}
	return fmt.Sprintf("%s%0*d", dictionaryFilePrefix, dictionaryIDDigits, id), nil
}

// ParseDictionaryFileName returns the id a dictionary file name carries:
// exactly "dictionary." and ten ASCII digits of a non-zero uint32.
// Anything else is ErrBadName.
func ParseDictionaryFileName(name string) (uint32, error) {
	digits, ok := strings.CutPrefix(name, dictionaryFilePrefix)
	if !ok || len(digits) != dictionaryIDDigits || !allDigits(digits) {
		return 0, fmt.Errorf("%w: dictionary file name %.64q: want %q and %d digits", ErrBadName, name, dictionaryFilePrefix, dictionaryIDDigits)
	}
	id, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: dictionary file name %q: id not in 1..2^32-1", ErrBadName, name)
	}
	return uint32(id), nil
}

// EncodeDictionaryFile is the content of a dictionary file. An id of 0, a
// negative time or a dictionary over MaxDictionaryFileBytes is
// ErrInvalidInput or ErrTooLarge.
func EncodeDictionaryFile(f DictionaryFile) ([]byte, error) {
	switch {
	case f.ID == 0:
		return nil, fmt.Errorf("%w: dictionary file: id 0", ErrInvalidInput)
	case f.TrainedAtMs < 0:
		return nil, fmt.Errorf("%w: dictionary file: negative time %d", ErrInvalidInput, f.TrainedAtMs)
	case len(f.Dictionary) > MaxDictionaryFileBytes:
		return nil, fmt.Errorf("%w: dictionary file: %d bytes, at most %d", ErrTooLarge, len(f.Dictionary), MaxDictionaryFileBytes)
	}
	b := make([]byte, DictionaryFileHeaderSize, DictionaryFileHeaderSize+len(f.Dictionary))
	copy(b, dictionaryFileMagic[:])
	binary.BigEndian.PutUint32(b[4:], f.ID)
	binary.BigEndian.PutUint64(b[8:], uint64(f.TrainedAtMs))
	binary.BigEndian.PutUint32(b[16:], uint32(len(f.Dictionary)))
	b = append(b, f.Dictionary...)
	binary.BigEndian.PutUint32(b[20:], dictionaryFileSum(b))
	return b, nil
}

// DecodeDictionaryFile checks a dictionary file's content and returns it;
// Dictionary aliases b. A short file is ErrTruncated, anything else wrong
// (magic, length, CRC, id 0, a negative time, bytes after the dictionary)
// ErrCorrupt. The dictionary's own format is the codec's to check.
func DecodeDictionaryFile(b []byte) (DictionaryFile, error) {
	if len(b) < DictionaryFileHeaderSize {
		return DictionaryFile{}, fmt.Errorf("%w: dictionary file: %d bytes, header is %d", ErrTruncated, len(b), DictionaryFileHeaderSize)
	}
	if [4]byte(b[:4]) != dictionaryFileMagic {
		return DictionaryFile{}, fmt.Errorf("%w: dictionary file: bad magic % x", ErrCorrupt, b[:4])
	}
	f := DictionaryFile{
		ID:          binary.BigEndian.Uint32(b[4:]),
		TrainedAtMs: int64(binary.BigEndian.Uint64(b[8:])),
	}
	length := int64(binary.BigEndian.Uint32(b[16:]))
	switch rest := int64(len(b) - DictionaryFileHeaderSize); {
	case length > MaxDictionaryFileBytes:
		return DictionaryFile{}, fmt.Errorf("%w: dictionary file: length %d over %d", ErrCorrupt, length, MaxDictionaryFileBytes)
	case rest < length:
		return DictionaryFile{}, fmt.Errorf("%w: dictionary file: %d of %d dictionary bytes", ErrTruncated, rest, length)
	case rest > length:
		return DictionaryFile{}, fmt.Errorf("%w: dictionary file: %d bytes after the dictionary", ErrCorrupt, rest-length)
	}
	if want, got := binary.BigEndian.Uint32(b[20:]), dictionaryFileSum(b); want != got {
		return DictionaryFile{}, fmt.Errorf("%w: dictionary file: crc32c 0x%08x, computed 0x%08x", ErrCorrupt, want, got)
	}
	if f.ID == 0 || f.TrainedAtMs < 0 {
		return DictionaryFile{}, fmt.Errorf("%w: dictionary file: id %d, time %d", ErrCorrupt, f.ID, f.TrainedAtMs)
	}
	f.Dictionary = b[DictionaryFileHeaderSize:]
	return f, nil
}

// dictionaryFileSum is the CRC-32C of a dictionary file's bytes [4, 20) and
// its dictionary.
func dictionaryFileSum(b []byte) uint32 {
	sum := crc32.Update(0, castagnoli, b[4:20])
	return crc32.Update(sum, castagnoli, b[DictionaryFileHeaderSize:])
}
