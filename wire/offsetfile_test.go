package wire

import (
	"bytes"
	"math"
	"testing"
)

func TestOffsetFile_BigEndianInt64(t *testing.T) {
	for _, c := range []struct {
		v    int64
		file []byte
	}{
		{0, []byte{0, 0, 0, 0, 0, 0, 0, 0}},
		{450832, []byte{0, 0, 0, 0, 0, 0x06, 0xE1, 0x10}},
		{math.MaxInt64, []byte{0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
	} {
		got, err := EncodeOffsetFile(c.v)
		if err != nil || !bytes.Equal(got[:], c.file) {
			t.Fatalf("EncodeOffsetFile(%d) = %x, %v", c.v, got, err)
		}
		v, present, err := DecodeOffsetFile(c.file)
		if err != nil || !present || v != c.v {
			t.Fatalf("DecodeOffsetFile(%x) = %d, %v, %v", c.file, v, present, err)
		}
	}
	_, err := EncodeOffsetFile(-1)
	wantErr(t, err, ErrInvalidInput)
}

func TestOffsetFile_EmptyMeansNoValue(t *testing.T) {
	// Design: the hwm file is emptied before the first advance, and an empty
	// consumer.offset left by a crash reads as "no offset".
	v, present, err := DecodeOffsetFile(nil)
	if err != nil || present || v != 0 {
		t.Fatalf("DecodeOffsetFile(empty) = %d, %v, %v", v, present, err)
	}
}

func TestDecodeOffsetFile_Rejects(t *testing.T) {
	// Rows 12 and 16: short files, long files, negative values.
	for _, file := range [][]byte{
		{0}, {0, 0, 0, 0, 0, 0, 0}, make([]byte, 9), make([]byte, 4096),
		{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF},
		{0x80, 0, 0, 0, 0, 0, 0, 0},
	} {
		v, present, err := DecodeOffsetFile(file)
		wantErr(t, err, ErrCorrupt)
		if present || v != 0 {
			t.Fatalf("DecodeOffsetFile(%x) = %d, %v with an error", file, v, present)
		}
	}
}

func FuzzDecodeOffsetFile(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0x06, 0xE1, 0x10})
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, present, err := DecodeOffsetFile(b)
		if err != nil {
			wantErr(t, err, ErrCorrupt)
			return
		}
		if !present {
			if len(b) != 0 {
				t.Fatalf("%d bytes read as absent", len(b))
			}
			return
		}
		again, err := EncodeOffsetFile(v)
		if err != nil || !bytes.Equal(again[:], b) {
			t.Fatalf("EncodeOffsetFile(%d) = %x, %v; decoded from %x", v, again, err, b)
		}
	})
}
