package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestParseIncarnationID(t *testing.T) {
	if id, err := ParseIncarnationID("3f9a1c0e7b2d4a61"); err != nil || id != "3f9a1c0e7b2d4a61" {
		t.Fatalf("ParseIncarnationID = %q, %v", id, err)
	}
	for _, s := range []string{
		"", "3f9a1c0e7b2d4a6", "3f9a1c0e7b2d4a611", "3F9A1C0E7B2D4A61", "3f9a1c0e7b2d4a6g",
		"3f9a1c0e7b2d4a6 ", "0x9a1c0e7b2d4a61", "0000000000000000",
	} {
		_, err := ParseIncarnationID(s)
		wantErr(t, err, ErrBadName)
	}
}

func TestNewIncarnationID_EightRandomBytesAsHex(t *testing.T) {
	id, err := NewIncarnationID(bytes.NewReader([]byte{0x3f, 0x9a, 0x1c, 0x0e, 0x7b, 0x2d, 0x4a, 0x61, 0xff}))
	if err != nil || id != "3f9a1c0e7b2d4a61" {
		t.Fatalf("NewIncarnationID = %q, %v", id, err)
	}
	if _, err := NewIncarnationID(bytes.NewReader([]byte{1, 2, 3})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short random source: %v", err)
	}
	// The all-zero id is reserved for "no id" in consumer.ahead.
	_, err = NewIncarnationID(bytes.NewReader(make([]byte, 8)))
	wantErr(t, err, ErrInvalidInput)
}

func TestIncarnationID_BytesRoundTrip(t *testing.T) {
	id := IncarnationID("3f9a1c0e7b2d4a61")
	b, err := id.Bytes()
	if err != nil || b != [8]byte{0x3f, 0x9a, 0x1c, 0x0e, 0x7b, 0x2d, 0x4a, 0x61} {
		t.Fatalf("Bytes = %x, %v", b, err)
	}
	if back := IncarnationIDFromBytes(b); back != id {
		t.Fatalf("IncarnationIDFromBytes = %q", back)
	}
	// Empty id <-> eight zero bytes: "no id".
	if b, err := IncarnationID("").Bytes(); err != nil || b != ([8]byte{}) {
		t.Fatalf("empty id Bytes = %x, %v", b, err)
	}
	if IncarnationIDFromBytes([8]byte{}) != "" {
		t.Fatal("zero bytes do not give the empty id")
	}
	_, err = IncarnationID("not an id").Bytes()
	wantErr(t, err, ErrBadName)
}

func TestIncarnationMarker(t *testing.T) {
	marker, err := EncodeIncarnationMarker("3f9a1c0e7b2d4a61")
	if err != nil || string(marker) != "3f9a1c0e7b2d4a61\n" {
		t.Fatalf("EncodeIncarnationMarker = %q, %v", marker, err)
	}
	for _, file := range []string{"3f9a1c0e7b2d4a61\n", "3f9a1c0e7b2d4a61"} {
		if id, err := DecodeIncarnationMarker([]byte(file)); err != nil || id != "3f9a1c0e7b2d4a61" {
			t.Fatalf("DecodeIncarnationMarker(%q) = %q, %v", file, id, err)
		}
	}
	for _, id := range []IncarnationID{"", "0000000000000000", "XYZ"} {
		_, err := EncodeIncarnationMarker(id)
		wantErr(t, err, ErrInvalidInput)
	}
}

func TestDecodeIncarnationMarker_Rejects(t *testing.T) {
	for _, file := range []string{
		"",
		"\n",
		"3f9a1c0e7b2d4a61\n\n",
		"3f9a1c0e7b2d4a61\r\n",
		"3f9a1c0e7b2d4a61 ",
		" 3f9a1c0e7b2d4a61",
		"3f9a1c0e7b2d4a6\n",
		"3F9A1C0E7B2D4A61\n",
		"0000000000000000\n",
		"3f9a1c0e7b2d4a61\x00",
		"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
	} {
		_, err := DecodeIncarnationMarker([]byte(file))
		wantErr(t, err, ErrCorrupt)
	}
}

func FuzzDecodeIncarnationMarker(f *testing.F) {
	f.Add([]byte("3f9a1c0e7b2d4a61\n"))
	f.Add([]byte("3f9a1c0e7b2d4a61"))
	f.Add([]byte("0000000000000000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := DecodeIncarnationMarker(b)
		if err != nil {
			wantErr(t, err, ErrCorrupt)
			return
		}
		marker, err := EncodeIncarnationMarker(id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(marker, b) && !bytes.Equal(marker[:IncarnationIDLen], b) {
			t.Fatalf("EncodeIncarnationMarker(%q) = %q, decoded from %q", id, marker, b)
		}
		raw, err := id.Bytes()
		if err != nil || IncarnationIDFromBytes(raw) != id {
			t.Fatalf("id %q does not round-trip through its bytes", id)
		}
	})
}

func FuzzParseIncarnationID(f *testing.F) {
	f.Add("3f9a1c0e7b2d4a61")
	f.Add("0000000000000000")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseIncarnationID(s)
		if err != nil {
			wantErr(t, err, ErrBadName)
			return
		}
		raw, err := id.Bytes()
		if err != nil || string(IncarnationIDFromBytes(raw)) != s {
			t.Fatalf("%q does not round-trip through its bytes", s)
		}
	})
}
