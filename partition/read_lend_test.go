package partition

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// bigValue is the value of record seq of a large-record test: seq's
// digits, then filler that depends on seq, size bytes in all.
func bigValue(seq int64, size int) []byte {
	b := fmt.Appendf(make([]byte, 0, size), "big=%d;", seq)
	for len(b) < size {
		b = append(b, byte(seq)+byte(len(b)))
	}
	return b
}

// bigRecords makes n records of size bytes for sequence numbers from on.
func bigRecords(from int64, n, size int) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{Value: bigValue(from+int64(i), size)}
	}
	return out
}

// copyRecord is a record a lending read lent, copied out.
func copyRecord(r ReadRecord) ReadRecord {
	r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
	return r
}

// frameBatch is frames frames of a test log, each of records records of
// size bytes (bigRecords).
type frameBatch struct{ frames, records, size int }

// writtenLog writes batches' frames, one Produce a frame, into segments
// of segmentBytes with codec id, and reopens the log so nothing is cached.
func writtenLog(t *testing.T, d *sim.Disk, id codec.ID, segmentBytes int64, batches []frameBatch) *Log {
	t.Helper()
	c, _ := codec.ByID(id)
	opts := Options{FS: d, SegmentMaxBytes: segmentBytes, Codec: c}
	l := openLog(t, opts)
	next := int64(0)
	for _, b := range batches {
		for range b.frames {
			if _, err := l.Produce(bg, bigRecords(next, b.records, b.size)); err != nil {
				t.Fatalf("offset %d: %v", next, err)
			}
			next += int64(b.records)
		}
	}
	closeLog(t, l)
	return openLog(t, opts)
}

// mixedLog writes frames of one record, of dozens and of thousands (some
// over readWindowMax, so read and checked in parts) into segments of
// 4 MiB, with both codecs, and reopens it so nothing is cached.
func mixedLog(t *testing.T, d *sim.Disk, id codec.ID) *Log {
	t.Helper()
	return writtenLog(t, d, id, 4<<20, []frameBatch{
		{3, 1, 100}, {3, 40, 300}, {3, 1, 5000}, {3, 600, 4096}, {3, 3, 70}, {3, 1, 200}, {3, 900, 2048}, {3, 50, 100}, {3, 1, 1 << 20}, {3, 7, 10},
	})
}

// TestReadFunc_LendsWhatReadReturns: from any offset, with any limits,
// ReadFunc lends exactly the records Read returns (checked against what
// was written), with the same Next, whatever the frame sizes and codec,
// and though it reuses its buffers between windows.
func TestReadFunc_LendsWhatReadReturns(t *testing.T) {
	for _, id := range []codec.ID{codec.None, codec.Zstd} {
		d := newDisk(t, 1)
		l := mixedLog(t, d, id)
		hwm := l.HighWatermark()
		checkLendsWhatReadReturns(t, l, []readLimits{{1, 1 << 30}, {7, 1 << 30}, {1 << 20, 1000}, {1 << 20, 300 << 10}, {1 << 20, 8 << 20}, {1 << 20, 1 << 30}},
			[]int64{0, 1, 40, 41, 123, 700, 1900, hwm - 30, hwm - 1, hwm})
		closeLog(t, l)
	}
}

// readLimits are a read's maxRecords and maxBytes.
type readLimits struct{ records, bytes int }

// checkLendsWhatReadReturns: from each offset, under each limits,
// ReadFunc lends exactly the records Read returns, each the bigValue
// written at its offset, with the same Next, records and bytes, and the
// high watermark.
func checkLendsWhatReadReturns(t *testing.T, l *Log, limits []readLimits, froms []int64) {
	t.Helper()
	hwm := l.HighWatermark()
	for _, limits := range limits {
		for _, from := range froms {
			var lent []ReadRecord
			sum, err := l.ReadFunc(from, limits.records, limits.bytes, func(r ReadRecord) error {
				lent = append(lent, copyRecord(r))
				return nil
			})
			if err != nil {
				t.Fatalf("ReadFunc(%d, %v): %v", from, limits, err)
			}
			res, err := l.Read(from, limits.records, limits.bytes)
			if err != nil {
				t.Fatalf("Read(%d, %v): %v", from, limits, err)
			}
			if sum.Next != res.Next || sum.HighWatermark != hwm || sum.Records != len(lent) || len(lent) != len(res.Records) {
				t.Fatalf("from %d, %v: ReadFunc lent %d (said %d), next %d; Read returned %d, next %d",
					from, limits, len(lent), sum.Records, sum.Next, len(res.Records), res.Next)
			}
			bytesLent := 0
			for i, r := range lent {
				if r.Offset != from+int64(i) || !bytes.Equal(r.Value, bigValue(r.Offset, len(r.Value))) ||
					!bytes.Equal(r.Value, res.Records[i].Value) || r.CommittedAtUnixMs != res.Records[i].CommittedAtUnixMs {
					t.Fatalf("from %d, %v: record %d lent as offset %d %.20q", from, limits, i, r.Offset, r.Value)
				}
				bytesLent += len(r.Value)
			}
			if sum.Bytes != bytesLent {
				t.Fatalf("from %d, %v: summary says %d bytes, lent %d", from, limits, sum.Bytes, bytesLent)
			}
		}
	}
}

// TestReadFunc_AnErrorFromFnEndsTheRead: fn's error comes back as it is,
// with Next at the record fn refused, so the caller resumes there.
func TestReadFunc_AnErrorFromFnEndsTheRead(t *testing.T) {
	d := newDisk(t, 1)
	l := mixedLog(t, d, codec.None)
	defer closeLog(t, l)
	checkARefusalEndsTheRead(t, l, 3, []int{0, 1, 5, 60})
}

// checkARefusalEndsTheRead: a ReadFunc from offset whose fn refuses its
// k-th record (for each k) ends with fn's error, k records lent and Next
// at the record refused.
func checkARefusalEndsTheRead(t *testing.T, l *Log, from int64, ks []int) {
	t.Helper()
	refuse := errors.New("the socket closed")
	for _, k := range ks {
		n := 0
		sum, err := l.ReadFunc(from, 1<<20, 1<<30, func(ReadRecord) error {
			if n == k {
				return refuse
			}
			n++
			return nil
		})
		if !errors.Is(err, refuse) || sum.Records != k || sum.Next != from+int64(k) {
			t.Fatalf("refused record %d: %v, %d records lent, next %d; want %v, %d, %d", k, err, sum.Records, sum.Next, refuse, k, from+int64(k))
		}
	}
}

// TestReadFunc_AllocatesNothingPerFrame: a catch-up ReadFunc over
// thousands of small frames allocates a handful of times in all, where a
// Read allocates its result and windows.
func TestReadFunc_AllocatesNothingPerFrame(t *testing.T) {
	d := newDisk(t, 1)
	l := oneRecordFrames(t, d, codec.None, 2000, 4<<20)
	defer closeLog(t, l)
	n := 0
	fn := func(ReadRecord) error { n++; return nil }
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := l.ReadFunc(0, 5000, 64<<20, fn); err != nil {
			t.Fatal(err)
		}
	})
	if n != 6*2000 || allocs > 8 {
		t.Fatalf("%d records lent with %.0f allocations a read of 2,000 frames, want 12000 with at most 8", n, allocs)
	}
}

// largeFrameInSealedSegment writes a small frame, a frame of 768 x 4 KiB
// records (3 MiB: read and checked in parts) and a small frame into
// segments of 1 MiB, so the large frame is sealed, and returns the log
// reopened and the large frame's span.
func largeFrameInSealedSegment(t *testing.T, d *sim.Disk, damage func(path string, big frameSpan)) (*Log, frameSpan) {
	t.Helper()
	opts := Options{FS: d, SegmentMaxBytes: 1 << 20}
	l := openLog(t, opts)
	for _, b := range [][]Record{bigRecords(0, 2, 100), bigRecords(2, 768, 4096), bigRecords(770, 5, 100)} {
		if _, err := l.Produce(bg, b); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	path := segmentPathOf(t, 0)
	frames := framesIn(t, d, path)
	if len(frames) != 2 || frames[1].size <= readWindowMax || slices.Equal(segmentBases(t, d), []int64{0}) {
		t.Fatalf("frames %+v in segments %v, want a small and a large one sealed", frames, segmentBases(t, d))
	}
	if damage != nil {
		damage(path, frames[1])
	}
	return openLog(t, opts), frames[1]
}

// TestRead_ALargeFrameDamagedPastItsFirstPartIsNeverServed: a frame
// checked part by part as it arrives is checked whole before any record
// of it is served: a bit flipped in its third MiB makes it unreadable, to
// Read and to ReadFunc, and the records around it still read.
func TestRead_ALargeFrameDamagedPastItsFirstPartIsNeverServed(t *testing.T) {
	d := newDisk(t, 1)
	l, big := largeFrameInSealedSegment(t, d, func(path string, big frameSpan) {
		at := big.pos + 2<<20 + 12345
		b, _ := d.Contents(path)
		if err := d.Damage(path, at, []byte{b[at] ^ 0x04}); err != nil {
			t.Fatal(err)
		}
	})
	defer closeLog(t, l)
	for _, from := range []int64{2, 3, 500} {
		_, err := l.Read(from, 1000, 1<<30)
		var unreadable *UnreadableError
		if !errors.As(err, &unreadable) || unreadable.Next != big.end() {
			t.Fatalf("Read(%d) in the damaged frame: %v, want an *UnreadableError up to %d", from, err, big.end())
		}
		lent := 0
		_, err = l.ReadFunc(from, 1000, 1<<30, func(ReadRecord) error { lent++; return nil })
		if !errors.As(err, &unreadable) || lent != 0 {
			t.Fatalf("ReadFunc(%d) in the damaged frame: %v after lending %d records, want an *UnreadableError and none", from, err, lent)
		}
	}
	sum, err := l.ReadFunc(0, 1000, 1<<30, func(r ReadRecord) error {
		if !bytes.Equal(r.Value, bigValue(r.Offset, 100)) {
			t.Fatalf("offset %d lent as %.20q", r.Offset, r.Value)
		}
		return nil
	})
	if err != nil || sum.Records != 2 || sum.Next != 2 {
		t.Fatalf("ReadFunc from 0: %d records, next %d, %v; want the 2 before the damage", sum.Records, sum.Next, err)
	}
	res, err := l.Read(big.end(), 1000, 1<<30)
	if err != nil || len(res.Records) != 5 || !bytes.Equal(res.Records[4].Value, bigValue(774, 100)) {
		t.Fatalf("read past the damage: %d records, %v", len(res.Records), err)
	}
}

// TestRead_ALargeFrameWhosePartFailsToReadIsReadWhole: a part read that
// fails once sends the frame back to the whole-frame read, which serves
// it intact; a part read that keeps failing fails the read with the I/O
// error, never a gap.
func TestRead_ALargeFrameWhosePartFailsToReadIsReadWhole(t *testing.T) {
	d := newDisk(t, 1)
	l, big := largeFrameInSealedSegment(t, d, nil)
	defer closeLog(t, l)
	partTwo := big.pos + readWindowMax + 100
	in := d.Inject(sim.Fault{Op: sim.OpRead, Path: segmentPathOf(t, 0), Off: partTwo, Len: 1, Nth: 1, Err: syscall.EIO})
	n := 0
	sum, err := l.ReadFunc(2, 768, 1<<30, func(r ReadRecord) error {
		if !bytes.Equal(r.Value, bigValue(r.Offset, 4096)) {
			t.Fatalf("offset %d lent as %.20q", r.Offset, r.Value)
		}
		n++
		return nil
	})
	if err != nil || n != 768 || sum.Next != big.end() || in.Fired() != 1 {
		t.Fatalf("read after %d failed parts: %d records, next %d, %v; want 1 failed, 768 records", in.Fired(), n, sum.Next, err)
	}

	d2 := newDisk(t, 1)
	l2, big2 := largeFrameInSealedSegment(t, d2, nil)
	defer closeLog(t, l2)
	d2.Inject(sim.Fault{Op: sim.OpRead, Path: segmentPathOf(t, 0), Off: big2.pos + readWindowMax + 100, Len: 1, Sticky: true, Err: syscall.EIO})
	_, err = l2.ReadFunc(2, 1000, 1<<30, func(r ReadRecord) error { t.Fatalf("record %d of an unreadable frame was lent", r.Offset); return nil })
	if err == nil || errors.Is(err, ErrUnreadable) {
		t.Fatalf("read of a frame that cannot be read: %v, want the I/O error", err)
	}
}

// TestRecover_ALargeTornLastFrameIsCut: recovery walks a large last frame
// in parts too; one whose file ends inside it is a torn tail, cut, and the
// frames before it stay.
func TestRecover_ALargeTornLastFrameIsCut(t *testing.T) {
	d := newDisk(t, 1)
	opts := Options{FS: d, SegmentMaxBytes: 64 << 20}
	l := openLog(t, opts)
	for _, b := range [][]Record{bigRecords(0, 2, 100), bigRecords(2, 768, 4096)} {
		if _, err := l.Produce(bg, b); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	path := segmentPathOf(t, 0)
	frames := framesIn(t, d, path)
	f, err := d.OpenFile(path, os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(frames[1].pos + 2<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := d.Remove(filepath.Join(testDir, wire.HWMFileName)); err != nil { // as after a crash: the boundary comes from the tail
		t.Fatal(err)
	}
	l = openLog(t, opts)
	defer closeLog(t, l)
	if l.HighWatermark() != 2 {
		t.Fatalf("high watermark %d after a torn large last frame, want 2", l.HighWatermark())
	}
	res, err := l.Read(0, 10, 1<<20)
	if err != nil || len(res.Records) != 2 || !bytes.Equal(res.Records[1].Value, bigValue(1, 100)) {
		t.Fatalf("read: %d records, %v", len(res.Records), err)
	}
}

// TestReadFunc_ConcurrentWithFailingCommits: a producer of small and
// large (> 1 MiB) batches whose commits fail now and then (their tails
// truncated); readers alternating Read and ReadFunc with varied limits,
// dropping the cache now and then. Records Read returned are held and must
// never change; records ReadFunc lends must be intact while lent (written
// by review).
func TestReadFunc_ConcurrentWithFailingCommits(t *testing.T) {
	for _, id := range []codec.ID{codec.None, codec.Zstd} {
		d := newDisk(t, 1)
		c, _ := codec.ByID(id)
		budget := NewCacheBudget(64 << 20)
		opts := Options{FS: d, SegmentMaxBytes: 4 << 20, Codec: c, CacheBudget: budget}
		l := openLog(t, opts)
		var produced sync.WaitGroup
		done := make(chan struct{})
		produced.Add(1)
		go func() {
			defer produced.Done()
			defer close(done)
			seq := int64(0)
			for i := range 24 {
				if i%7 == 6 {
					d.Inject(sim.Fault{Op: sim.OpWrite, Path: testDir + "/*.log", Nth: 1, Short: 100, Err: syscall.ENOSPC})
				}
				var b []Record
				switch i % 4 {
				case 0:
					b = bigRecords(seq, 300+i*3, 4096) // 1.2+ MiB
				case 1:
					b = bigRecords(seq, 1, 100)
				case 2:
					b = bigRecords(seq, 50, 2000)
				default:
					b = bigRecords(seq, 700, 4096) // ~2.8 MiB
				}
				if _, err := l.Produce(bg, b); err != nil {
					if !errors.Is(err, ErrNoSpace) {
						t.Errorf("produce: %v", err)
						return
					}
					continue // the offsets are reused
				}
				seq += int64(len(b))
			}
		}()
		var mu sync.Mutex
		var kept []ReadRecord
		var readers sync.WaitGroup
		for g := range 3 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 9))
				next := int64(0)
				for iter := 0; ; iter++ {
					if wake := l.NotifyC(); next >= l.HighWatermark() {
						select {
						case <-done:
							if next >= l.HighWatermark() {
								return
							}
						case <-wake:
						}
						continue
					}
					if rng.IntN(8) == 0 {
						l.cache.forgetFrom(0)
					}
					if rng.IntN(6) == 0 {
						next = rng.Int64N(l.HighWatermark() + 1)
					}
					maxR, maxB := 1+rng.IntN(800), 1+rng.IntN(3<<20)
					if iter%2 == 0 {
						res, err := l.Read(next, maxR, maxB)
						if err != nil {
							t.Errorf("read at %d: %v", next, err)
							return
						}
						mu.Lock()
						kept = append(kept, res.Records...)
						mu.Unlock()
						next = res.Next
						continue
					}
					sum, err := l.ReadFunc(next, maxR, maxB, func(r ReadRecord) error {
						if !bytes.Equal(r.Value, bigValue(r.Offset, len(r.Value))) {
							t.Errorf("lent offset %d: %.20q", r.Offset, r.Value)
						}
						return nil
					})
					if err != nil {
						t.Errorf("readfunc at %d: %v", next, err)
						return
					}
					next = sum.Next
				}
			}()
		}
		produced.Wait()
		readers.Wait()
		all, gaps := readAll(t, l)
		if len(gaps) > 0 {
			t.Fatalf("gaps %v", gaps)
		}
		for _, r := range kept {
			want := all[r.Offset]
			if !bytes.Equal(r.Value, want.Value) {
				t.Fatalf("codec %d: offset %d held %.20q, the log holds %.20q", id, r.Offset, r.Value, want.Value)
			}
		}
		if len(kept) == 0 {
			t.Fatalf("codec %d: Read returned nothing to hold", id)
		}
		closeLog(t, l)
	}
}
