package partition

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/wire"
)

// TestCacheBudget_BoundsTheFramesOfEveryLogSharingIt: logs sharing a
// budget never hold more cached frame bytes, once a read is served, than
// it allows; reads stay exact whatever was cached or dropped; a closed log
// gives all its bytes back.
func TestCacheBudget_BoundsTheFramesOfEveryLogSharingIt(t *testing.T) {
	d := newDisk(t, 1)
	if err := d.MkdirAll("/data/topics/orders/p00001"); err != nil {
		t.Fatal(err)
	}
	budget := NewCacheBudget(3 << 10)
	opts := testOptions(d)
	opts.CacheBudget = budget
	a := openLog(t, opts)
	b, err := Open("/data/topics/orders/p00001", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		for _, l := range []*Log{a, b} {
			if _, err := l.Produce(bg, records(1, int64(i*2), 2)); err != nil {
				t.Fatal(err)
			}
		}
	}
	peak := int64(0)
	for pass := range 2 {
		for offset := int64(0); offset < 80; offset++ {
			for _, l := range []*Log{a, b} {
				res, err := l.Read(offset, 1, 1<<20)
				if err != nil || len(res.Records) != 1 || !bytes.Equal(res.Records[0].Value, value(1, offset)) {
					t.Fatalf("pass %d: read at %d: %v", pass, offset, err)
				}
				if used := budget.Used(); used > budget.Limit() {
					t.Fatalf("pass %d offset %d: %d bytes cached, budget %d", pass, offset, used, budget.Limit())
				} else if used > peak {
					peak = used
				}
			}
		}
	}
	if peak == 0 {
		t.Fatal("nothing was ever cached: the test did not exercise the budget")
	}
	closeLog(t, a)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if used := budget.Used(); used != 0 {
		t.Fatalf("%d bytes still charged to the budget after every log closed", used)
	}
}

// TestFrameCache_CountsADecodedFrameAtTheMemoryItKeeps: a compressed
// frame a read stopped inside is cached decoded, and counted against the
// log's bound and the node's budget at what it keeps (its decoded records
// and their slice), not at its size on disk, which let a frame of
// compressible records keep about 2,000 times what it was counted at.
func TestFrameCache_CountsADecodedFrameAtTheMemoryItKeeps(t *testing.T) {
	d := newDisk(t, 1)
	zstd, err := codec.ByID(codec.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	budget := NewCacheBudget(64 << 20)
	opts := Options{FS: d, Codec: zstd, CacheBudget: budget}
	l := openLog(t, opts)
	batch := make([]Record, 150)
	for i := range batch {
		batch[i].Value = bytes.Repeat([]byte{byte('a' + i%26)}, 4096)
	}
	if _, err := l.Produce(bg, batch); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	l = openLog(t, opts)
	defer closeLog(t, l)
	if res, err := l.Read(0, 10, 1<<30); err != nil || len(res.Records) != 10 { // stops inside the frame: it is cached
		t.Fatalf("read: %d records, %v", len(res.Records), err)
	}
	l.cache.mu.Lock()
	frames, charged := len(l.cache.frames), l.cache.bytes
	l.cache.mu.Unlock()
	keeps := 150*(4096+wire.EnvelopeSize(0, 4096)-4096+wire.RecordLenSize) + 150*int(unsafe.Sizeof(ReadRecord{}))
	if frames != 1 || charged < keeps || budget.Used() != int64(charged) {
		t.Fatalf("%d frames cached, counted at %d bytes (budget %d); want one, at the %d bytes its records keep or more", frames, charged, budget.Used(), keeps)
	}
	if onDisk, err := d.Contents(testDir + "/00000000000000000000.log"); err != nil || len(onDisk)*10 > keeps {
		t.Fatalf("the segment holds %d bytes (%v): not compressed enough to tell the counts apart", len(onDisk), err)
	}
}

// cachedFrames is what l's cache holds in its frames: how many, and the
// bytes it counts for them, and the first's records' capacity.
func cachedFrames(l *Log) (frames, counted, firstRecords int) {
	l.cache.mu.Lock()
	defer l.cache.mu.Unlock()
	if len(l.cache.frames) > 0 {
		firstRecords = cap(l.cache.frames[0].records)
	}
	return len(l.cache.frames), l.cache.bytes, firstRecords
}

// readRecordBytes is the memory of one ReadRecord.
const readRecordBytes = int(unsafe.Sizeof(ReadRecord{}))

// stopInsideFirstFrame writes a frame of n records of size bytes, and a
// frame after it, reopens the log with a node's budget, and reads one
// record of the first frame, lending or not, so the read stops inside it.
func stopInsideFirstFrame(t *testing.T, n, size int, lend bool) *Log {
	t.Helper()
	d := newDisk(t, 1)
	opts := Options{FS: d, CacheBudget: NewCacheBudget(64 << 20)}
	l := openLog(t, opts)
	for _, b := range [][]Record{bigRecords(0, n, size), bigRecords(int64(n), 20, 4000)} { // the second: the segment outgrows a window
		if _, err := l.Produce(bg, b); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	l = openLog(t, opts)
	var err error
	if lend {
		_, err = l.ReadFunc(0, 1, 1<<30, func(ReadRecord) error { return nil })
	} else {
		_, err = l.Read(0, 1, 1<<30)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestFrameCache_CountsAFrameKeptInPlaceAtItsBuffer: a frame a read
// stopped inside, kept where the scan read it, is counted at the whole
// buffer it keeps (it fills at least half of it) and its records: a
// 33 KB frame in a read's 64 KiB window among the log's frames, a frame
// just over a window (1.1 MiB) in a lending read's 2 MiB pooled buffer as
// the large frame. A 600 KiB frame, which in place would keep a 1 MiB
// buffer and take the large frame's place, is copied instead and counted
// at its copy.
func TestFrameCache_CountsAFrameKeptInPlaceAtItsBuffer(t *testing.T) {
	l := stopInsideFirstFrame(t, 9, 3700, false)
	if frames, counted, records := cachedFrames(l); frames != 1 || counted != readWindow+records*readRecordBytes {
		t.Errorf("33 KB frame: %d frames cached, counted at %d bytes; want one, at its window's %d and its records' %d", frames, counted, readWindow, records*readRecordBytes)
	}
	closeLog(t, l)

	l = stopInsideFirstFrame(t, 275, 4096, true)
	l.cache.mu.Lock()
	large, counted := l.cache.large, l.cache.bytes
	l.cache.mu.Unlock()
	if large == nil || large.pooled == nil || counted != 2<<20+cap(large.records)*readRecordBytes {
		t.Errorf("1.1 MiB frame: large frame %v, counted at %d bytes; want it in its pooled 2 MiB buffer, counted at that and its records", large != nil, counted)
	}
	closeLog(t, l)

	l = stopInsideFirstFrame(t, 150, 4096, true)
	if frames, counted, _ := cachedFrames(l); frames != 1 || counted < 150*4096 || counted >= 1<<20 {
		t.Errorf("600 KiB frame: %d frames cached, counted at %d bytes; want one, a copy of its records", frames, counted)
	}
	closeLog(t, l)
}

// TestFrameCache_TakesAWrittenBatchOfAMebibyteForATailReader: a batch of
// about 600 KiB, laid out in a pooled buffer of 1 MiB, is cached as it is
// written for a tail reader, counted at that buffer and its records
// (found by review: counting the records put every batch of the 1 MiB
// class over a bound of 1 MiB a frame).
func TestFrameCache_TakesAWrittenBatchOfAMebibyteForATailReader(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d, CacheBudget: NewCacheBudget(64 << 20)})
	defer closeLog(t, l)
	if _, err := l.Read(0, 1, 1); err != nil { // a tail reader: the next frame written is cached
		t.Fatal(err)
	}
	if _, err := l.Produce(bg, bigRecords(0, 150, 4096)); err != nil {
		t.Fatal(err)
	}
	if frames, counted, records := cachedFrames(l); frames != 1 || counted != 1<<20+records*readRecordBytes {
		t.Fatalf("%d frames cached, counted at %d bytes; want the written one, at %d", frames, counted, 1<<20+records*readRecordBytes)
	}
}
