package partition

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/wire"
)

// TestOffsetAt_AgreesWithAScan: seek by time (docs/design.md, "Seek by
// time") against a scan of every record, over random commit times (equal
// times, gaps, long pauses), many segments and a prefix retention
// deleted: for every time asked, the offset of the first record at or
// after it, the start when every record is, and the high watermark when
// none is.
func TestOffsetAt_AgreesWithAScan(t *testing.T) {
	for seed := range uint64(4) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			d := newDisk(t, seed)
			l := openLog(t, testOptions(d)) // 4 KiB segments
			defer closeLog(t, l)
			gaps := []time.Duration{0, 0, time.Millisecond, 3 * time.Millisecond, time.Second}
			seq := int64(0)
			for range 150 {
				<-time.After(gaps[rng.IntN(len(gaps))])
				n := 1 + rng.IntN(4)
				if _, err := l.Produce(bg, records(seed, seq, n)); err != nil {
					t.Fatal(err)
				}
				seq += int64(n)
			}
			if seed%2 == 1 { // a prefix deleted by retention
				if _, err := l.SetRetention(bg, 0, 8<<10); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Sweep(bg); err != nil {
					t.Fatal(err)
				}
				if l.StartOffset() == 0 {
					t.Fatal("retention deleted nothing")
				}
			}
			recs, _ := readAll(t, l)
			first, last := recs[0].CommittedAtUnixMs, recs[len(recs)-1].CommittedAtUnixMs
			for at := first - 2; at <= last+2; at++ {
				want := l.HighWatermark()
				for _, r := range recs {
					if r.CommittedAtUnixMs >= at {
						want = r.Offset
						break
					}
				}
				got, err := l.OffsetAt(at)
				if err != nil || got != want {
					t.Fatalf("seed %d: OffsetAt(%d) = %d, %v; a scan says %d (start %d, high watermark %d)",
						seed, at, got, err, want, l.StartOffset(), l.HighWatermark())
				}
			}
		})
	}
}

// TestOffsetAt_StepsOverADamagedFrame: the time of a damaged frame's
// records is unknown; the seek steps over them and stays exact for every
// readable record.
func TestOffsetAt_StepsOverADamagedFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		l := openLog(t, testOptions(d))
		for i := range 3 {
			<-time.After(time.Second)
			if _, err := l.Produce(bg, records(1, int64(i*2), 2)); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now().Add(-2 * time.Second).UnixMilli() // the first frame's time
		closeLog(t, l)
		seg := testDir + "/00000000000000000000.log"
		b, _ := d.Contents(seg)
		h, err := wireFrameHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Damage(seg, h+40, []byte("rot")); err != nil { // the second frame
			t.Fatal(err)
		}
		l = openLog(t, testOptions(d))
		defer closeLog(t, l)
		for _, c := range []struct{ at, want int64 }{
			{start, 0},
			{start + 1, 2},    // the second frame (1 s later) is damaged: from 2, the next readable is 4
			{start + 1000, 2}, // the damaged frame's own time
			{start + 2000, 2}, // the third frame's time
			{start + 2001, 6}, // none: the high watermark
		} {
			if got, err := l.OffsetAt(c.at); err != nil || got != c.want {
				t.Fatalf("OffsetAt(first + %d ms) = %d, %v; want %d", c.at-start, got, err, c.want)
			}
		}
	})
}

// wireFrameHeader is the length of the frame at the start of b.
func wireFrameHeader(b []byte) (int64, error) {
	h, err := wire.ParseFrameHeader(b)
	return h.FrameLen(), err
}
