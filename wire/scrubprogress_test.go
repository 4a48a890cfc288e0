package wire

import (
	"errors"
	"testing"
)

func TestScrubProgressRoundTrip(t *testing.T) {
	for _, p := range []ScrubProgress{{}, {Next: 450832, CompletedUnixMs: 1765000000000}, {Next: 1<<62 - 1}} {
		b, err := EncodeScrubProgress(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeScrubProgress(b[:])
		if err != nil || got != p {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", p, got, err)
		}
	}
	if _, err := EncodeScrubProgress(ScrubProgress{Next: -1}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("negative next: %v, want ErrInvalidInput", err)
	}
}

// TestScrubProgressDamage: every flipped bit and every length but the
// file's is ErrCorrupt, never a wrong position.
func TestScrubProgressDamage(t *testing.T) {
	b, err := EncodeScrubProgress(ScrubProgress{Next: 77, CompletedUnixMs: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i := range len(b) * 8 {
		c := b
		c[i/8] ^= 1 << (i % 8)
		if _, err := DecodeScrubProgress(c[:]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
	for n := range len(b) {
		if _, err := DecodeScrubProgress(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d bytes: %v, want ErrCorrupt", n, err)
		}
	}
}

func FuzzDecodeScrubProgress(f *testing.F) {
	b, _ := EncodeScrubProgress(ScrubProgress{Next: 1024, CompletedUnixMs: 99})
	f.Add(b[:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeScrubProgress(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		again, err := EncodeScrubProgress(p)
		if err != nil || string(again[:]) != string(b) {
			t.Fatalf("decoded %+v does not encode back to its bytes: %v", p, err)
		}
	})
}
