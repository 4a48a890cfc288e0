package partition

import (
	"strings"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs/sim"
)

// oneRecordFrames writes n frames of one record each (a trickle-fed
// partition) into a log with segments of segmentBytes and reopens it, so
// nothing is cached.
func oneRecordFrames(t *testing.T, d *sim.Disk, id codec.ID, n int, segmentBytes int64) *Log {
	t.Helper()
	c, _ := codec.ByID(id)
	opts := Options{FS: d, SegmentMaxBytes: segmentBytes, Codec: c}
	l := openLog(t, opts)
	for i := range n {
		if _, err := l.Produce(bg, records(1, int64(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	return openLog(t, opts)
}

// countReads counts the reads of segment files while fn runs.
func countReads(d *sim.Disk, fn func()) (reads int) {
	reads, _ = countReadBytes(d, fn)
	return reads
}

// countReadBytes counts the reads of segment files while fn runs, and the
// bytes they asked for.
func countReadBytes(d *sim.Disk, fn func()) (reads int, bytes int64) {
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRead && strings.HasSuffix(c.Path, ".log") {
			reads++
			bytes += int64(c.Len)
		}
		return nil
	})
	fn()
	d.SetHook(nil)
	return reads, bytes
}

// TestRead_CatchUpDecodesEveryFrameOfAWindow: a catch-up read of small
// frames (one record each) reads each window of the segment once and
// serves every frame in it, in order and intact, with both codecs: the
// records of an uncompressed frame point into the window, which no later
// read of the scan overwrites.
func TestRead_CatchUpDecodesEveryFrameOfAWindow(t *testing.T) {
	for _, id := range []codec.ID{codec.None, codec.Zstd} {
		d := newDisk(t, 1)
		l := oneRecordFrames(t, d, id, 2000, 4<<20)
		var res ReadResult
		reads := countReads(d, func() {
			var err error
			if res, err = l.Read(0, 5000, 64<<20); err != nil {
				t.Fatal(err)
			}
		})
		if len(res.Records) != 2000 || res.Next != 2000 {
			t.Fatalf("codec %d: read %d records, next %d", id, len(res.Records), res.Next)
		}
		for i, r := range res.Records {
			if r.Offset != int64(i) || checkRecord(t, 1, r) != int64(i) {
				t.Fatalf("codec %d: record %d at offset %d", id, i, r.Offset)
			}
		}
		size := l.view.Load().active.size
		// Windows of 64 KiB, doubling to 1 MiB: a handful, never one a frame.
		if bound := int(size/readWindow) + 2; reads > bound {
			t.Fatalf("codec %d: %d reads for %d bytes of %d frames: more than %d", id, reads, size, 2000, bound)
		}
		closeLog(t, l)
	}
}

// TestRead_CatchUpAllocatesPerWindowNotPerFrame: reading many small frames
// allocates for the windows and the result, not for every frame.
func TestRead_CatchUpAllocatesPerWindowNotPerFrame(t *testing.T) {
	d := newDisk(t, 1)
	l := oneRecordFrames(t, d, codec.None, 2000, 4<<20)
	defer closeLog(t, l)
	allocs := testing.AllocsPerRun(5, func() {
		l.cache.forgetFrom(0) // every run reads the segment
		res, err := l.Read(0, 5000, 64<<20)
		if err != nil || len(res.Records) != 2000 {
			t.Fatalf("read: %d records, %v", len(res.Records), err)
		}
	})
	if allocs > 100 {
		t.Fatalf("%.0f allocations to read 2,000 one-record frames: one a frame or more", allocs)
	}
	t.Logf("%.0f allocations to read 2,000 one-record frames", allocs)
}

// TestRead_ALargeFrameReadInPartsIsReadOnce: a frame larger than a
// reader's max bytes (and than the per-frame cache bound) is read from
// the disk and checked once, then served from the cache part by part.
func TestRead_ALargeFrameReadInPartsIsReadOnce(t *testing.T) {
	d := newDisk(t, 1)
	opts := Options{FS: d, SegmentMaxBytes: 64 << 20, CacheBudget: NewCacheBudget(64 << 20)}
	l := openLog(t, opts)
	big := make([]Record, 1024)
	for i := range big {
		big[i] = Record{Key: []byte{byte(i)}, Value: make([]byte, 4096)}
		big[i].Value[0] = byte(i)
	}
	if _, err := l.Produce(bg, big); err != nil { // one 4 MiB frame
		t.Fatal(err)
	}
	closeLog(t, l)
	l = openLog(t, opts)
	defer closeLog(t, l)
	got := 0
	_, readBytes := countReadBytes(d, func() {
		for next := int64(0); next < l.HighWatermark(); {
			res, err := l.Read(next, 1000, 256<<10)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Records {
				if r.Value[0] != byte(r.Offset) || len(r.Value) != 4096 {
					t.Fatalf("offset %d: value %x...", r.Offset, r.Value[:4])
				}
				got++
			}
			next = res.Next
		}
	})
	if frame := int64(l.view.Load().active.size); got != 1024 || readBytes > frame+readWindow {
		t.Fatalf("%d records in %d bytes read from the segment, want 1024 in at most %d (a header window, the frame once)", got, readBytes, frame+readWindow)
	}
}

// TestReadFunc_FramesOfManyRecordsReuseTheirScratch: a catch-up read of
// frames of 4,096 small records decodes them into a pooled slice, not one
// grown anew (a dozen allocations, half a megabyte) on every call; and a slice
// goes back to the pool emptied, pinning none of the windows its records
// pointed into.
func TestReadFunc_FramesOfManyRecordsReuseTheirScratch(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d})
	defer closeLog(t, l)
	for i := range 3 {
		if _, err := l.Produce(bg, records(4096, int64(i*4096), 4096)); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	fn := func(ReadRecord) error { n++; return nil }
	allocs := testing.AllocsPerRun(20, func() {
		l.cache.forgetFrom(0)
		if _, err := l.ReadFunc(0, 1<<16, 64<<20, fn); err != nil {
			t.Fatal(err)
		}
	})
	// A slice grown anew each read: 18 allocations, 21 under the race
	// detector, whose sync.Pool drops a quarter of what is put back.
	bound := 8.0
	if raceEnabled {
		bound = 17
	}
	if n != 21*3*4096 || allocs > bound {
		t.Fatalf("%d records lent with %.0f allocations a read of 3 frames of 4,096 records, want %d with at most %.0f", n, allocs, 21*3*4096, bound)
	}

	// A frame of one record after the large ones: the read's slice goes
	// back with length 1, and must still be pooled all zero.
	if _, err := l.Produce(bg, records(1, 3*4096, 1)); err != nil {
		t.Fatal(err)
	}
	l.cache.forgetFrom(0)
	if _, err := l.ReadFunc(0, 1<<16, 64<<20, fn); err != nil {
		t.Fatal(err)
	}
	var drawn []*[]ReadRecord
	for range 4 {
		p := getRecordScratch()
		drawn = append(drawn, p)
		for i, r := range (*p)[:cap(*p)] {
			if r.Key != nil || r.Value != nil {
				t.Fatalf("pooled scratch entry %d of %d still points into a window", i, cap(*p))
			}
		}
	}
	for _, p := range drawn {
		putRecordScratch(p, 0)
	}

	// A read that used three entries (a frame of three records), then one
	// (the next frame): its slice has length 1 when it goes back.
	window := make([]byte, 16)
	backing := make([]ReadRecord, 3, 8)
	for i := range backing {
		backing[i] = ReadRecord{Key: window[:4], Value: window[4:]}
	}
	scratch := &[]ReadRecord{}
	*scratch = backing[:1]
	putRecordScratch(scratch, 3)
	for i, r := range backing[:cap(backing)] {
		if r.Key != nil || r.Value != nil {
			t.Fatalf("pooled scratch entry %d still points into a window: %+v", i, r)
		}
	}
}
