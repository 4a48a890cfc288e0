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
// compressible records keep a hundred times what it was counted at.
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
