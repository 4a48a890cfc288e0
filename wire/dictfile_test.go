package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestDictionaryFileVector(t *testing.T) {
	vector := readHexVector(t, "dictionary_file.hex")
	want := DictionaryFile{ID: 40000, TrainedAtMs: 1764489646075, Dictionary: []byte("hello")}
	if got := crc32cBitwise(vector[4:20], vector[24:]); got != 0xb5085de2 {
		t.Fatalf("the vector's CRC is 0x%08x by the bitwise CRC", got)
	}
	got, err := DecodeDictionaryFile(vector)
	if err != nil || got.ID != want.ID || got.TrainedAtMs != want.TrainedAtMs || !bytes.Equal(got.Dictionary, want.Dictionary) {
		t.Fatalf("DecodeDictionaryFile = %+v, %v; want %+v", got, err, want)
	}
	encoded, err := EncodeDictionaryFile(want)
	if err != nil || !bytes.Equal(encoded, vector) {
		t.Fatalf("EncodeDictionaryFile = % x, %v; want the vector % x", encoded, err, vector)
	}
}

func TestDictionaryFileRefusesDamage(t *testing.T) {
	good, err := EncodeDictionaryFile(DictionaryFile{ID: 32768, TrainedAtMs: 5, Dictionary: bytes.Repeat([]byte("d"), 300)})
	if err != nil {
		t.Fatal(err)
	}
	for cut := range len(good) {
		if _, err := DecodeDictionaryFile(good[:cut]); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	for bit := range len(good) * 8 {
		flipped := bytes.Clone(good)
		flipped[bit/8] ^= 1 << (bit % 8)
		if _, err := DecodeDictionaryFile(flipped); err == nil {
			t.Fatalf("bit %d flipped: decoded without error", bit)
		}
	}
	if _, err := DecodeDictionaryFile(append(bytes.Clone(good), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a byte after the dictionary: %v", err)
	}
	for name, f := range map[string]DictionaryFile{
		"id 0":          {ID: 0},
		"negative time": {ID: 1, TrainedAtMs: -1},
		"too large":     {ID: 1, Dictionary: make([]byte, MaxDictionaryFileBytes+1)},
	} {
		if _, err := EncodeDictionaryFile(f); err == nil {
			t.Errorf("%s: EncodeDictionaryFile accepted it", name)
		}
	}
}

func TestDictionaryFileNames(t *testing.T) {
	for _, id := range []uint32{1, 32768, 765402008, 1<<32 - 1} {
		name, err := DictionaryFileName(id)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ParseDictionaryFileName(name); err != nil || got != id {
			t.Fatalf("ParseDictionaryFileName(%q) = %d, %v; want %d", name, got, err, id)
		}
	}
	if name, _ := DictionaryFileName(40000); name != "dictionary.0000040000" {
		t.Fatalf("DictionaryFileName(40000) = %q", name)
	}
	if _, err := DictionaryFileName(0); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("DictionaryFileName(0): %v", err)
	}
	for _, name := range []string{"dictionary.0000000000", "dictionary.4294967296", "dictionary.000004000", "dictionary.00000400000",
		"dictionary.00000x0000", "dictionary.0000040000.tmp", "Dictionary.0000040000", "p00001", "incarnation"} {
		if _, err := ParseDictionaryFileName(name); !errors.Is(err, ErrBadName) {
			t.Errorf("ParseDictionaryFileName(%q): %v, want ErrBadName", name, err)
		}
	}
}

// FuzzDecodeDictionaryFile: any bytes decode to a file that encodes back to
// them, or fail with ErrTruncated or ErrCorrupt; nothing is allocated from
// a length the file states.
func FuzzDecodeDictionaryFile(f *testing.F) {
	good, _ := EncodeDictionaryFile(DictionaryFile{ID: 40000, TrainedAtMs: 7, Dictionary: []byte("hello")})
	f.Add(good)
	f.Add(good[:10])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeDictionaryFile(b)
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is neither ErrTruncated nor ErrCorrupt", err)
			}
			return
		}
		again, err := EncodeDictionaryFile(got)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v does not encode back: %v", got, err)
		}
	})
}
