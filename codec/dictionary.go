package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"
)

// Dictionary bounds. A dictionary is read from a file and handed to the zstd
// library whole, so its size is checked before anything is allocated for it.
const (
	// MaxDictionaryBytes is the largest dictionary Parse accepts and Train
	// builds: 1 MiB, ten times the 110 KiB zstd's own trainer defaults to.
	MaxDictionaryBytes = 1 << 20
	// DefaultDictionaryBytes is the size Train aims at when asked for none.
	DefaultDictionaryBytes = 64 << 10
	// MinDictionaryID and MaxDictionaryID bound a dictionary id: RFC 8878
	// reserves 1-32767 and 2^31 and above for registered dictionaries, and
	// 0 means none.
	MinDictionaryID = 32768
	MaxDictionaryID = 1<<31 - 1
	// MinTrainingSamples is the fewest samples Train accepts: fewer than this
	// teach a dictionary nothing a frame would not find in itself.
	MinTrainingSamples = 8
	// MaxTrainingBytes bounds the samples Train reads: 64 MiB.
	MaxTrainingBytes = 64 << 20
)

var (
	// ErrDictionaryMissing is wrapped by Decode of a frame whose dictionary
	// the codec was not given: the frame is intact but cannot be read here.
	// It is not ErrCorrupt: the bytes are what was written.
	ErrDictionaryMissing = errors.New("codec: frame's dictionary missing")
	// ErrBadDictionary is wrapped by ParseDictionary and TrainDictionary for
	// bytes that are no dictionary we accept, and samples no dictionary can
	// be trained from.
	ErrBadDictionary = errors.New("codec: bad dictionary")
)

// Dictionary is one zstd dictionary (RFC 8878, "Dictionary format"): its id,
// which every frame compressed with it carries in its zstd frame header, and
// its bytes. It is immutable and safe for concurrent use; its encoder and
// decoder are made on first use and shared, like the plain codec's.
//
// INVARIANT: raw is a dictionary zstd.InspectDictionary accepts, of at most
// MaxDictionaryBytes, whose id is id, in [MinDictionaryID, MaxDictionaryID];
// nobody writes raw after ParseDictionary.
type Dictionary struct {
	id      uint32
	raw     []byte
	encoder func() (*zstd.Encoder, error)
	decoder func() (*zstd.Decoder, error)
}

// dictionaryEncoderLevel is the level frames are compressed at with a
// dictionary: SpeedFastest. The library starts every frame from the
// dictionary's match tables, copying back every shard the last frame
// touched, which for a frame of a few hundred bytes is nearly all of them:
// at SpeedDefault (two tables) that cost 45-107 us a one-record frame here
// (3-7 MB/s), at SpeedFastest (one table) 10 us (34 MB/s), for 60% saved
// instead of 62% (codec's BenchmarkCompression).
const dictionaryEncoderLevel = zstd.SpeedFastest

// dictionaryEncoderConcurrency is how many frames one dictionary's encoder
// encodes at once: its block encoders, each holding its own match tables
// and a copy of the dictionary's, made when the encoder is and kept as
// long as the dictionary. The library's default is GOMAXPROCS (2.4 MiB at
// 2, 18 MiB at 64, per dictionary, up to 16 a topic); each log encodes its
// frames on its one flusher, and a dictionary is its topic's, so two at
// once is plenty: a third log of the topic encoding at the same instant
// waits the 10-25 us one frame takes.
const dictionaryEncoderConcurrency = 2

// ParseDictionary checks raw and returns the dictionary it holds, with its
// own copy of the bytes.
func ParseDictionary(raw []byte) (*Dictionary, error) {
	if len(raw) > MaxDictionaryBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrBadDictionary, len(raw), MaxDictionaryBytes)
	}
	inspected, err := zstd.InspectDictionary(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDictionary, err)
	}
	id := inspected.ID()
	if id < MinDictionaryID || id > MaxDictionaryID {
		return nil, fmt.Errorf("%w: id %d outside [%d, %d]", ErrBadDictionary, id, MinDictionaryID, MaxDictionaryID)
	}
	d := &Dictionary{id: id, raw: bytes.Clone(raw)}
	d.encoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return newZstdEncoder(zstd.WithEncoderDict(d.raw), zstd.WithEncoderLevel(dictionaryEncoderLevel),
			zstd.WithEncoderConcurrency(dictionaryEncoderConcurrency))
	})
	d.decoder = sync.OnceValues(func() (*zstd.Decoder, error) { return newZstdDecoder(zstd.WithDecoderDicts(d.raw)) })
	return d, nil
}

// TrainDictionary builds a dictionary of at most maxBytes (0:
// DefaultDictionaryBytes) from samples: frame payloads as the codec is
// given them. Its id is derived from the trained dictionary's own content
// (a CRC-32C of everything after the id, mapped into the id range): the
// library's trainer does not give the same bytes twice for the same
// samples, so an id of the samples would name two dictionaries after a
// retry, while an id of the content names one, and a node never needs to
// ask another which ids are taken; a collision between different
// dictionaries is refused where they meet (DictionarySet.Add). The samples
// are only read.
func TrainDictionary(samples [][]byte, maxBytes int) (*Dictionary, error) {
	if maxBytes == 0 {
		maxBytes = DefaultDictionaryBytes
	}
	if maxBytes < 1<<10 || maxBytes > MaxDictionaryBytes {
		return nil, fmt.Errorf("%w: size %d outside [1024, %d]", ErrBadDictionary, maxBytes, MaxDictionaryBytes)
	}
	if len(samples) < MinTrainingSamples {
		return nil, fmt.Errorf("%w: %d samples, at least %d", ErrBadDictionary, len(samples), MinTrainingSamples)
	}
	total := 0
	for _, sample := range samples {
		total += len(sample)
		if total > MaxTrainingBytes {
			return nil, fmt.Errorf("%w: samples over %d bytes", ErrBadDictionary, MaxTrainingBytes)
		}
	}
	raw, err := buildZstdDictionary(samples, maxBytes, MinDictionaryID)
	if err != nil {
		return nil, err
	}
	// RFC 8878: the magic number, then the id (4 bytes, little-endian),
	// then the entropy tables and content the id is taken from.
	content := crc32.Checksum(raw[8:], crc32.MakeTable(crc32.Castagnoli))
	binary.LittleEndian.PutUint32(raw[4:8], MinDictionaryID+content%(MaxDictionaryID-MinDictionaryID+1))
	return ParseDictionary(raw)
}

// buildZstdDictionary runs the library's trainer, which panics on some
// inputs it cannot learn from instead of failing: a panic is an error here.
func buildZstdDictionary(samples [][]byte, maxBytes int, id uint32) (raw []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			raw, err = nil, fmt.Errorf("%w: training failed: %v", ErrBadDictionary, r)
		}
	}()
	raw, err = dict.BuildZstdDict(samples, dict.Options{
		MaxDictSize: maxBytes,
		HashBytes:   6,
		ZstdDictID:  id,
		ZstdLevel:   dictionaryEncoderLevel, // the level frames are encoded at
	})
	if err != nil {
		return nil, fmt.Errorf("%w: training: %w", ErrBadDictionary, err)
	}
	if len(raw) > MaxDictionaryBytes || len(raw) < 8 {
		return nil, fmt.Errorf("%w: trained %d bytes, at least 8 and at most %d", ErrBadDictionary, len(raw), MaxDictionaryBytes)
	}
	return raw, nil
}

// ID is the dictionary's id, as frames compressed with it name it.
func (d *Dictionary) ID() uint32 { return d.id }

// Bytes is the dictionary in the zstd dictionary format. The caller must not
// change it.
func (d *Dictionary) Bytes() []byte { return d.raw }

// Equal reports whether d and other are the same dictionary, byte for byte.
func (d *Dictionary) Equal(other *Dictionary) bool {
	return d.id == other.id && bytes.Equal(d.raw, other.raw)
}

// DictionarySet is a topic's dictionaries by id: the ones its frames may
// name, and the current one new frames are encoded with. Safe for
// concurrent use. The zero value is empty and ready.
//
// INVARIANT: an id maps to one dictionary for the set's life (Add refuses a
// different dictionary under a taken id), so a frame decodes the same way
// every time it is read; current, when set, is in byID, and currentCodec
// encodes with it.
type DictionarySet struct {
	mu           sync.RWMutex
	byID         map[uint32]*Dictionary
	current      *Dictionary
	currentCodec Codec

	decodingOnce sync.Once
	decoding     Codec // decodes with any of the set's dictionaries
}

// decodingCodec is the codec that decodes a frame with the set's
// dictionary it names, made once.
func (s *DictionarySet) decodingCodec() Codec {
	s.decodingOnce.Do(func() { s.decoding = zstdDictCodec{dicts: s} })
	return s.decoding
}

// SetCurrent makes the set's dictionary id the one CurrentCodec encodes
// with. An id the set does not hold is ErrDictionaryMissing.
func (s *DictionarySet) SetCurrent(id uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.byID[id]
	if !ok {
		return fmt.Errorf("%w: dictionary %d is not in the set", ErrDictionaryMissing, id)
	}
	s.current, s.currentCodec = d, WithDictionary(d, s)
	return nil
}

// Current is the dictionary new frames are encoded with, or nil.
func (s *DictionarySet) Current() *Dictionary {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.current
}

// CurrentCodec is the codec that encodes with the current dictionary (and
// decodes with any of the set's), or nil when there is none. It is made
// once per SetCurrent, so asking for it allocates nothing.
func (s *DictionarySet) CurrentCodec() Codec {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.currentCodec
}

// ErrDictionaryConflict is returned by Add for a dictionary whose id the set
// already holds with other bytes.
var ErrDictionaryConflict = errors.New("codec: a different dictionary has this id")

// Add puts d in the set. Adding a dictionary already there is a no-op.
func (s *DictionarySet) Add(d *Dictionary) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.byID[d.id]; ok {
		if !have.Equal(d) {
			return fmt.Errorf("%w: id %d", ErrDictionaryConflict, d.id)
		}
		return nil
	}
	if s.byID == nil {
		s.byID = make(map[uint32]*Dictionary)
	}
	s.byID[d.id] = d
	return nil
}

// Lookup returns the dictionary with id, or nil. A nil set holds none.
func (s *DictionarySet) Lookup(id uint32) *Dictionary {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID[id]
}

// IDs returns the ids the set holds, in no particular order.
func (s *DictionarySet) IDs() []uint32 {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]uint32, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	return ids
}
