package partition

import (
	"testing"
)

// TestReadBack_ReadsInOneGo: the commit's read-back of the frames
// background drains left above the high watermark reads them in one read
// up to readBackWindow, not in a lending read's 1 MiB windows (found by
// review).
func TestReadBack_ReadsInOneGo(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d, SegmentMaxBytes: 64 << 20})
	defer closeLog(t, l)
	for i := range 7 {
		if _, err := l.Append(bg, bigRecords(int64(i*240), 240, 4096)); err != nil { // 240 records: < 1000, ~1 MiB: a drain each
			t.Fatal(err)
		}
	}
	reads, bytes := countReadBytes(d, func() {
		if err := l.CommitDurable(bg); err != nil {
			t.Fatal(err)
		}
	})
	if reads > 2 {
		t.Fatalf("read-back of ~7 MiB took %d reads (%d bytes)", reads, bytes)
	}
}

// TestReadBack_AFrameLargerThanTheWindowIsReadOnce: the read-back of one
// frame larger than readBackWindow reads it once: the read that finds its
// header takes a part into a buffer that holds the frame, not a window of
// it to be read again.
func TestReadBack_AFrameLargerThanTheWindowIsReadOnce(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d, SegmentMaxBytes: 64 << 20})
	defer closeLog(t, l)
	recs := bigRecords(0, 3000, 4096) // one frame of ~12 MiB
	_, read := countReadBytes(d, func() {
		if _, err := l.Produce(bg, recs); err != nil {
			t.Fatal(err)
		}
	})
	frame := int64(frameBytesOf(recs))
	if frame <= readBackWindow {
		t.Fatalf("a frame of %d bytes fits the read-back window", frame)
	}
	if read != frame {
		t.Fatalf("read-back of a %d-byte frame read %d bytes", frame, read)
	}
}
