package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"testing"
)

func sampleTimeIndex() TimeIndex {
	return TimeIndex{SegmentBase: 100, SegmentSize: 200000, Entries: []TimeIndexEntry{
		{Offset: 100, Pos: 0, TimeMs: 1700000000000},
		{Offset: 340, Pos: 65600, TimeMs: 1700000000000},
		{Offset: 612, Pos: 131300, TimeMs: 1700000004000},
	}}
}

// TestTimeIndex_Layout pins the byte layout the package doc gives: a
// change to it is a format change.
func TestTimeIndex_Layout(t *testing.T) {
	b, err := EncodeTimeIndex(TimeIndex{SegmentBase: 7, SegmentSize: 100, Entries: []TimeIndexEntry{{Offset: 7, Pos: 0, TimeMs: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	want := "4e54495801000000" + "0000000000000007" + "0000000000000064" + "00000001" +
		"0000000000000007" + "0000000000000000" + "0000000000000005"
	if got := hex.EncodeToString(b[:len(b)-4]); got != want {
		t.Fatalf("layout\n got %s\nwant %s", got, want)
	}
	if len(b) != timeIndexHeaderSize+timeIndexEntrySize+timeIndexCRCSize {
		t.Fatalf("%d bytes", len(b))
	}
	if name, err := TimeIndexFileName(450832); err != nil || name != "00000000000000450832.timeindex" {
		t.Fatalf("TimeIndexFileName = %q, %v", name, err)
	}
	if _, err := TimeIndexFileName(-1); err == nil {
		t.Fatal("a negative base named a file")
	}
}

func TestTimeIndex_RoundTrip(t *testing.T) {
	for _, x := range []TimeIndex{sampleTimeIndex(), {SegmentBase: 0, SegmentSize: 0}} {
		b, err := EncodeTimeIndex(x)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != TimeIndexFileSize(len(x.Entries)) {
			t.Fatalf("%d bytes, TimeIndexFileSize %d", len(b), TimeIndexFileSize(len(x.Entries)))
		}
		got, err := DecodeTimeIndex(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.SegmentBase != x.SegmentBase || got.SegmentSize != x.SegmentSize || len(got.Entries) != len(x.Entries) {
			t.Fatalf("decoded %+v, want %+v", got, x)
		}
		for i := range x.Entries {
			if got.Entries[i] != x.Entries[i] {
				t.Fatalf("entry %d: %+v, want %+v", i, got.Entries[i], x.Entries[i])
			}
		}
	}
}

// TestEncodeTimeIndex_RefusesWhatItCouldNotDecode: the encoder checks the
// same rules the decoder does.
func TestEncodeTimeIndex_RefusesWhatItCouldNotDecode(t *testing.T) {
	for name, mutate := range map[string]func(*TimeIndex){
		"negative base":        func(x *TimeIndex) { x.SegmentBase = -1 },
		"entry below the base": func(x *TimeIndex) { x.Entries[0].Offset = 99 },
		"offsets out of order": func(x *TimeIndex) { x.Entries[1].Offset = 100 },
		"positions repeat":     func(x *TimeIndex) { x.Entries[2].Pos = 65600 },
		"past the segment":     func(x *TimeIndex) { x.Entries[2].Pos = 200000 },
		"time goes back":       func(x *TimeIndex) { x.Entries[2].TimeMs = 1 },
	} {
		x := sampleTimeIndex()
		mutate(&x)
		if _, err := EncodeTimeIndex(x); err == nil {
			t.Errorf("%s: encoded", name)
		} else {
			wantErr(t, err, ErrInvalidInput)
		}
	}
}

func TestDecodeTimeIndex_Rejects(t *testing.T) {
	good, err := EncodeTimeIndex(sampleTimeIndex())
	if err != nil {
		t.Fatal(err)
	}
	resum := func(b []byte) []byte {
		body := b[:len(b)-4]
		return binary.BigEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
	}
	huge := bytes.Clone(good[:timeIndexHeaderSize])
	binary.BigEndian.PutUint32(huge[24:], 1<<31)
	for name, b := range map[string][]byte{
		"empty":            {},
		"short":            good[:20],
		"truncated":        good[:len(good)-1],
		"trailing garbage": append(bytes.Clone(good), 0),
		"bit flip":         flip(good, 40),
		"bad magic":        resum(flip(good, 0)),
		"bad version":      resum(flip(good, 4)),
		"count past bound": resum(append(huge, 0, 0, 0, 0)),
		"time goes back":   resum(flip(good, timeIndexHeaderSize+2*timeIndexEntrySize+16)),
		"entry past size":  resum(flip(good, 16)),
	} {
		if _, err := DecodeTimeIndex(b); err == nil {
			t.Errorf("%s: decoded", name)
		} else {
			wantErr(t, err, ErrCorrupt)
		}
	}
}

func flip(b []byte, at int) []byte {
	c := bytes.Clone(b)
	c[at] ^= 0x80
	return c
}

func FuzzDecodeTimeIndex(f *testing.F) {
	good, _ := EncodeTimeIndex(sampleTimeIndex())
	f.Add(good)
	empty, _ := EncodeTimeIndex(TimeIndex{})
	f.Add(empty)
	f.Add(good[:30])
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := DecodeTimeIndex(b)
		if err != nil {
			wantErr(t, err, ErrCorrupt)
			return
		}
		again, err := EncodeTimeIndex(x)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("EncodeTimeIndex(%+v) = %x, %v; decoded from %x", x, again, err, b)
		}
	})
}
