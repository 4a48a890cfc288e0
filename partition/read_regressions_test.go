package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"syscall"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/internal/testmem"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// TestRead_AOneRecordReadHoldsOnlyItsRecords: a read of one record of a
// frame of many tiny records hands its caller a result holding that
// record, not an array with a ReadRecord for every record of the frame
// (64 bytes each, held as long as the caller holds the result).
func TestRead_AOneRecordReadHoldsOnlyItsRecords(t *testing.T) {
	d := newDisk(t, 1)
	opts := Options{FS: d, SegmentMaxBytes: 64 << 20}
	l := openLog(t, opts)
	const n = 100_000
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Value: []byte{byte(i)}}
	}
	if _, err := l.Produce(bg, recs); err != nil { // one frame of 100,000 tiny records
		t.Fatal(err)
	}
	closeLog(t, l)
	l = openLog(t, opts)
	defer closeLog(t, l)
	l.cache.budget = NewCacheBudget(0) // nothing can be cached: every read reads the disk
	var res ReadResult
	bytes := testmem.Allocated(func() {
		var err error
		if res, err = l.Read(n/2, 1, 1<<20); err != nil || len(res.Records) != 1 {
			t.Fatalf("read: %d records, %v", len(res.Records), err)
		}
	})
	t.Logf("a one-record read: cap(res.Records) %d, %d bytes allocated", cap(res.Records), bytes)
	if cap(res.Records) > 64 {
		t.Fatalf("a one-record result holds an array of %d ReadRecords (%d KiB)", cap(res.Records), cap(res.Records)*64>>10)
	}
}

// TestRead_ALogOpenedWithDefaultOptionsReadsALargeFrameOnce: a log given
// no CacheBudget (an embedder of the log alone) shares the process's
// budget, so a 16 MiB frame read in 1 MiB parts is read from the disk
// about once, where it used to be read and checked again for every part
// (16 times); what it keeps counts against the process's budget and goes
// back at its close.
func TestRead_ALogOpenedWithDefaultOptionsReadsALargeFrameOnce(t *testing.T) {
	d := newDisk(t, 1)
	opts := Options{FS: d, SegmentMaxBytes: 64 << 20} // no CacheBudget
	l := openLog(t, opts)
	const records, size = 4096, 4096
	big := make([]Record, records)
	for i := range big {
		big[i] = Record{Value: make([]byte, size)}
	}
	if _, err := l.Produce(bg, big); err != nil { // one 16 MiB frame
		t.Fatal(err)
	}
	closeLog(t, l)
	before := processCacheBudget.Used()
	l = openLog(t, opts)
	if l.cache.budget != processCacheBudget {
		t.Fatal("a log opened without a CacheBudget does not share the process's")
	}
	got := 0
	_, readBytes := countReadBytes(d, func() {
		for next := int64(0); next < records; {
			res, err := l.Read(next, records, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			got += len(res.Records)
			next = res.Next
		}
	})
	if got != records {
		t.Fatalf("read %d records, want %d", got, records)
	}
	if frame := int64(records * size); readBytes > 3*frame {
		t.Fatalf("reading a %d-byte frame in 1 MiB parts read %d bytes from the disk (%.1f times the frame)", frame, readBytes, float64(readBytes)/float64(frame))
	}
	if processCacheBudget.Used() <= before {
		t.Fatalf("the large frame is not counted against the process's budget (used %d, %d before the open)", processCacheBudget.Used(), before)
	}
	closeLog(t, l)
	if used := processCacheBudget.Used(); used != before {
		t.Fatalf("the process's budget holds %d bytes after the close, %d before the open", used, before)
	}
}

// TestRead_ACompressedFrameAllocatesAboutItsSize: a read of one large
// zstd frame, whole or one record of it, allocates about the decoded
// frame: the arena is sized for the frame being decoded, and a frame the
// cache would refuse is not decoded a second time for it.
func TestRead_ACompressedFrameAllocatesAboutItsSize(t *testing.T) {
	d := newDisk(t, 1)
	c, _ := codec.ByID(codec.Zstd)
	opts := Options{FS: d, SegmentMaxBytes: 64 << 20, Codec: c}
	l := openLog(t, opts)
	const n = 2048
	big := make([]Record, n)
	for i := range big {
		v := make([]byte, 4096)
		for j := 0; j < len(v); j += 8 { // poorly compressible
			copy(v[j:], value(uint64(i), int64(j))[:8])
		}
		big[i] = Record{Value: v}
	}
	if _, err := l.Produce(bg, big); err != nil { // one frame, 8 MiB decoded
		t.Fatal(err)
	}
	closeLog(t, l)
	l = openLog(t, opts)
	defer closeLog(t, l)
	const decoded = n * (4096 + 16)
	whole := testmem.Allocated(func() {
		res, err := l.Read(0, n, 64<<20)
		if err != nil || len(res.Records) != n {
			t.Fatalf("read: %d records, %v", len(res.Records), err)
		}
	})
	l.cache.forgetFrom(0)
	part := testmem.Allocated(func() {
		if _, err := l.Read(0, 1, 1); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("decoded frame %d MiB: a whole read allocates %d MiB, a one-record read %d MiB", decoded>>20, whole>>20, part>>20)
	if whole > 3*decoded || part > 3*decoded {
		t.Fatalf("reading one %d MiB frame allocates %d MiB (whole) / %d MiB (one record): over 3x its size", decoded>>20, whole>>20, part>>20)
	}
}

// TestRead_ABadBlockCostsFewFailedReads: a sealed segment of small
// frames with one sector that fails reads (docs/durability.md row 9). A
// read of the frame just before it scans from the segment's start (no
// index after a reopen), and every window reaching the bad sector fails
// and is retried at the size asked for: the search reuses one 64 KiB
// window, so the failed reads stay within 64 KiB of the sector and
// nothing is allocated per refill.
func TestRead_ABadBlockCostsFewFailedReads(t *testing.T) {
	d := newDisk(t, 1)
	opts := fourKiBFrames(t, d)
	path := segmentPathOf(t, 0)
	frames, positions := framesOf(t, d, path, 0)
	frameLen := positions[1] - positions[0]
	worstFailed, worstBytes := 0, uint64(0)
	for bad := int64(2 << 20); bad < 4<<20-64<<10; bad += 128 << 10 {
		target := 0
		for positions[target+1]+frameLen <= bad {
			target++
		}
		inj := d.Inject(sim.Fault{Op: sim.OpRead, Path: path, Off: bad, Len: 512, Sticky: true, Err: syscall.EIO})
		l := openLog(t, opts)
		bytes := testmem.Allocated(func() {
			res, err := l.Read(frames[target].BaseOffset, 1, 1<<20)
			if err != nil || len(res.Records) != 1 {
				t.Fatalf("read at %d: %d records, %v", frames[target].BaseOffset, len(res.Records), err)
			}
		})
		closeLog(t, l)
		inj.Remove()
		if inj.Fired() > worstFailed {
			worstFailed, worstBytes = inj.Fired(), bytes
		}
	}
	t.Logf("worst: %d failed reads and %d MiB allocated to read one %d-byte frame before a bad sector", worstFailed, worstBytes>>20, frameLen)
	if bound := int(2*readWindow/frameLen) + 8; worstFailed > bound || worstBytes > 16<<20 {
		t.Fatalf("one read: %d failed reads of the bad sector (bound %d, a 64 KiB window's worth), %d MiB allocated", worstFailed, bound, worstBytes>>20)
	}
}

// TestRead_ALargeFrameOfADetachedSegmentIsNotCached: a read of a sealed
// segment's large frame races a retention sweep that detaches the segment
// while the read is in the disk; the frame is not cached after (the
// cache holds no offset below the start, which would stay charged to the
// node's budget until the next detach).
func TestRead_ALargeFrameOfADetachedSegmentIsNotCached(t *testing.T) {
	d := newDisk(t, 1)
	budget := NewCacheBudget(1 << 30)
	opts := Options{FS: d, SegmentMaxBytes: 1 << 20, CacheBudget: budget}
	l := openLog(t, opts)
	defer closeLog(t, l)
	big := make([]Record, 1024)
	for i := range big {
		big[i] = Record{Value: make([]byte, 4096)}
	}
	if _, err := l.Produce(bg, big); err != nil { // segment 0: one 4 MiB frame
		t.Fatal(err)
	}
	produceRecords(t, l, 1, 1024, 10, 10) // rolls: segment 0 sealed
	if bases := segmentBases(t, d); len(bases) < 2 {
		t.Fatalf("segments %v", bases)
	}
	seg0 := segmentPathOf(t, 0)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpRead && c.Path == seg0 && c.Len >= 1<<20 {
			once.Do(func() { close(entered); <-release })
		}
		return nil
	})
	done := make(chan error)
	go func() {
		_, err := l.Read(0, 1, 1) // stops inside the large frame
		done <- err
	}()
	<-entered
	if _, err := l.SetRetention(bg, 0, 1); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Sweep(bg); err != nil || res.DeletedSegments != 1 {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("read: %v", err)
	}
	d.SetHook(nil)
	if start := l.StartOffset(); start == 0 {
		t.Fatal("segment 0 not deleted")
	}
	if f := l.cache.get(0, false); f != nil {
		t.Fatalf("offsets [%d, %d) of a deleted segment are cached (%d bytes); the budget counts %d bytes used", f.base, f.end, f.bytes, budget.Used())
	}
}

// fourKiBFrames writes about 1,100 frames of one 4 KiB record each, in
// 4 MiB segments (segment 0 sealed), and returns the log's options.
func fourKiBFrames(t *testing.T, d *sim.Disk) Options {
	t.Helper()
	opts := Options{FS: d, SegmentMaxBytes: 4 << 20}
	opts.flush = defaultFlushPolicy
	opts.flush.drainRecords = 1 // one frame a record
	l := openLog(t, opts)
	for range 1100 {
		if _, err := l.Append(bg, []Record{{Key: []byte("k"), Value: make([]byte, 4000)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.CommitDurable(bg); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	return opts
}

// TestRead_AOneRecordReadOfAColdSegmentAllocatesAWindow: a one-record
// read of a sealed segment whose index is gone (reopened, or dropped from
// the hot set) scans from its start through one reused 64 KiB window:
// no frame before the one read is handed out, so no refill of the search
// allocates, and the record returned pins a window, not a megabyte.
func TestRead_AOneRecordReadOfAColdSegmentAllocatesAWindow(t *testing.T) {
	d := newDisk(t, 1)
	opts := fourKiBFrames(t, d)
	frames, _ := framesOf(t, d, segmentPathOf(t, 0), 0)
	last := frames[len(frames)-1].BaseOffset
	l := openLog(t, opts)
	defer closeLog(t, l)
	bytes := testmem.Allocated(func() {
		if res, err := l.Read(last, 1, 1<<20); err != nil || len(res.Records) != 1 {
			t.Fatalf("read at %d: %d records, %v", last, len(res.Records), err)
		}
	})
	t.Logf("a one-record read at the end of a cold 4 MiB segment allocates %d KiB", bytes>>10)
	if bytes > 1<<20 {
		t.Fatalf("a one-record read allocates %d KiB", bytes>>10)
	}
}

// TestRead_AFrameWhoseRecordsDoNotParseAfterAGoodOneIsDamaged: a frame
// whose CRC checks out but whose second record's envelope does not parse
// (a writer's bug, not the disk's), read after a good frame in the same
// scan, is damaged: no record of it is served, and the read neither
// panics nor pools a record slice that still points into its window.
func TestRead_AFrameWhoseRecordsDoNotParseAfterAGoodOneIsDamaged(t *testing.T) {
	d := newDisk(t, 1)
	opts := Options{FS: d}
	l := openLog(t, opts)
	for from := int64(0); from < 6; from += 3 {
		if _, err := l.Produce(bg, records(1, from, 3)); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	name := testDir + "/00000000000000000000.log"
	seg, err := d.Contents(name)
	if err != nil {
		t.Fatal(err)
	}
	first, err := wire.CheckFrame(seg)
	if err != nil {
		t.Fatal(err)
	}
	pos := first.FrameLen()
	second, err := wire.CheckFrame(seg[pos:])
	if err != nil {
		t.Fatal(err)
	}
	frame := bytes.Clone(seg[pos : pos+second.FrameLen()])
	recordOne := wire.FrameHeaderSize + 4 + int(binary.BigEndian.Uint32(frame[wire.FrameHeaderSize:]))
	frame[recordOne+4] ^= 0xff // its envelope's version byte
	frame, err = wire.AppendFrame(nil, second.Codec, second.BaseOffset, int(second.RecordCount), int(second.UncompressedSize), frame[wire.FrameHeaderSize:])
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Damage(name, pos, frame); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, opts)
	defer closeLog(t, l)
	for _, lend := range []bool{false, true} {
		var got []int64
		var err error
		if lend {
			_, err = l.ReadFunc(0, 100, 1<<20, func(r ReadRecord) error { got = append(got, r.Offset); return nil })
		} else {
			var res ReadResult
			res, err = l.Read(0, 100, 1<<20)
			for _, r := range res.Records {
				got = append(got, r.Offset)
			}
		}
		if err != nil || len(got) != 3 || got[2] != 2 {
			t.Fatalf("read from 0 (lending %v): offsets %v, %v; want the first frame's", lend, got, err)
		}
		var unreadable *UnreadableError
		if _, err := l.Read(3, 100, 1<<20); !errors.As(err, &unreadable) || unreadable.Next != 6 {
			t.Fatalf("read of the frame that does not parse: %v", err)
		}
	}
	scratch := getRecordScratch()
	defer putRecordScratch(scratch, 0)
	for i, r := range (*scratch)[:cap(*scratch)] {
		if r.Value != nil || r.Key != nil {
			t.Fatalf("a pooled record slice holds a record at entry %d", i)
		}
	}
}

// TestRead_BareLogsGiveTheProcessBudgetBack: logs opened without a
// CacheBudget share the process's; whatever they cache (large frames a
// read stopped inside, their proofs, tail frames) goes back to it when
// retention drops it and when the log closes, with readers still reading
// at the close, so a process that opens and closes bare logs for a long
// time never finds its budget shrunk by the logs it closed. Found worth
// keeping by the review of the shared budget.
func TestRead_BareLogsGiveTheProcessBudgetBack(t *testing.T) {
	before := processCacheBudget.Used()
	beforeLarge := processCacheBudget.large.Load()
	for round := range 4 {
		d := newDisk(t, uint64(round+1))
		l := openLog(t, Options{FS: d, SegmentMaxBytes: 4 << 20, RetentionMaxBytes: 12 << 20})
		batch := make([]Record, 400+100*round)
		for i := range batch {
			batch[i] = Record{Value: make([]byte, 4096)}
		}
		for range 6 { // frames of 1.6 to 2.8 MiB, segments of 4 MiB: sealed ones for the sweep
			if _, err := l.Produce(bg, batch); err != nil {
				t.Fatal(err)
			}
		}
		read := func(maxBytes int) {
			for next := l.StartOffset(); next < l.HighWatermark(); {
				res, err := l.Read(next, 1<<16, maxBytes)
				if err != nil {
					return // the close below: ErrLogClosed
				}
				next = res.Next
			}
		}
		read(1 << 20) // large frames a read stopped inside, cached
		if _, err := l.Sweep(bg); err != nil {
			t.Fatal(err)
		}
		var readers sync.WaitGroup
		for _, maxBytes := range []int{1 << 20, 256 << 10} {
			readers.Go(func() { read(maxBytes) })
		}
		closeLog(t, l) // readers may still be reading
		readers.Wait()
		if used, large := processCacheBudget.Used(), processCacheBudget.large.Load(); used != before || large != beforeLarge {
			t.Fatalf("round %d: the process's budget holds %d bytes (%d of large frames) after the close; %d (%d) before", round, used, large, before, beforeLarge)
		}
	}
}
