package partition

import (
	"errors"
	"math/bits"
	"path"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fillSegments produces pairs of records a millisecond apart until the
// log has at least n sealed segments, and returns every record.
func fillSegments(t *testing.T, l *Log, n int) []ReadRecord {
	t.Helper()
	return fillSegmentsBy(t, l, n, 2)
}

// fillSegmentsBy is fillSegments with batches of batch records.
func fillSegmentsBy(t *testing.T, l *Log, n, batch int) []ReadRecord {
	t.Helper()
	seq := int64(0)
	for len(l.view.Load().sealed) < n {
		<-time.After(time.Millisecond)
		if _, err := l.Produce(bg, records(1, seq, batch)); err != nil {
			t.Fatal(err)
		}
		seq += int64(batch)
	}
	recs, _ := readAll(t, l)
	return recs
}

// sealedLog fills a test log (4 KiB segments) until it has n sealed
// segments and closes it: its disk, options, records and sealed segments.
func sealedLog(t *testing.T, n int) (*sim.Disk, Options, []ReadRecord, []*segment) {
	t.Helper()
	d := newDisk(t, 1)
	opts := testOptions(d)
	l := openLog(t, opts)
	recs := fillSegments(t, l, n)
	sealed := l.view.Load().sealed
	closeLog(t, l)
	return d, opts, recs, sealed
}

// timeIndexFile reads and decodes the time index file of the segment at
// base.
func timeIndexFile(d *sim.Disk, base int64) (wire.TimeIndex, error) {
	b, err := d.Contents(timeIndexPath(testDir, base))
	if err != nil {
		return wire.TimeIndex{}, err
	}
	return wire.DecodeTimeIndex(b)
}

// settle returns once the actor has handled every message sent before it
// (the mailbox is in order): the time index writes seeks asked for.
func settle(t *testing.T, l *Log) {
	t.Helper()
	if _, err := l.Expired(bg); err != nil {
		t.Fatal(err)
	}
}

// checkSeeks fails the test unless OffsetAt agrees with a scan of recs for
// every millisecond from before the first record to after the last.
func checkSeeks(t *testing.T, l *Log, recs []ReadRecord) {
	t.Helper()
	first, last := recs[0].CommittedAtUnixMs, recs[len(recs)-1].CommittedAtUnixMs
	for at := first - 1; at <= last+1; at++ {
		want := l.HighWatermark()
		for _, r := range recs {
			if r.CommittedAtUnixMs >= at {
				want = r.Offset
				break
			}
		}
		if got, err := l.OffsetAt(at); err != nil || got != want {
			t.Fatalf("OffsetAt(%d) = %d, %v; a scan says %d", at, got, err, want)
		}
	}
}

// TestTimeIndex_WrittenWhenASegmentIsSealed: every sealed segment has a
// time index file (docs/design.md, "Seek by time") that fits it: its base
// and size, entries at frame starts with their first record's time, the
// first frame always among them; the active segment has none.
func TestTimeIndex_WrittenWhenASegmentIsSealed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		l := openLog(t, testOptions(d))
		defer closeLog(t, l)
		recs := fillSegments(t, l, 4)
		timeOf := map[int64]int64{}
		for _, r := range recs {
			timeOf[r.Offset] = r.CommittedAtUnixMs
		}
		v := l.view.Load()
		for _, seg := range v.sealed {
			x, err := timeIndexFile(d, seg.base)
			if err != nil {
				t.Fatalf("segment %d: %v", seg.base, err)
			}
			if x.SegmentBase != seg.base || x.SegmentSize != seg.sealedSize || len(x.Entries) < 2 || x.Entries[0].Pos != 0 {
				t.Fatalf("segment %d (%d bytes): index %+v", seg.base, seg.sealedSize, x)
			}
			for _, e := range x.Entries {
				b, _ := d.Contents(seg.path)
				h, err := wire.CheckFrame(b[e.Pos:])
				if err != nil || h.BaseOffset != e.Offset || timeOf[e.Offset] != e.TimeMs {
					t.Fatalf("segment %d: entry %+v: frame %+v, %v; record time %d", seg.base, e, h, err, timeOf[e.Offset])
				}
			}
		}
		if _, err := d.Contents(timeIndexPath(testDir, v.active.base)); err == nil {
			t.Fatal("the active segment has a time index file")
		}
	})
}

// TestOffsetAt_ReadsAFewFramesOf64Segments: on sealed segments with cold
// caches (the log just opened), a seek reads one frame per bisection step
// over the segments, the time index of the one it ends in, and a few
// frames of that segment: never the segments it passes over, and as few
// in segments of 1 MiB (16 read windows each) as in segments of 4 KiB.
func TestOffsetAt_ReadsAFewFramesOf64Segments(t *testing.T) {
	for _, c := range []struct {
		segmentBytes  int64
		segments, per int
	}{{4 << 10, 64, 2}, {1 << 20, 16, 64}} {
		synctest.Test(t, func(t *testing.T) {
			d := newDisk(t, 1)
			opts := testOptions(d)
			opts.SegmentMaxBytes = c.segmentBytes
			l := openLog(t, opts)
			recs := fillSegmentsBy(t, l, c.segments, c.per)
			closeLog(t, l)
			l = openLog(t, opts)
			defer closeLog(t, l)
			reads := 0
			d.SetHook(func(call sim.Call) error {
				if call.Op == sim.OpRead {
					reads++
				}
				return nil
			})
			want := recs[len(recs)*2/3+c.per/2]
			got, err := l.OffsetAt(want.CommittedAtUnixMs)
			d.SetHook(nil)
			if err != nil || got > want.Offset || recs[got].CommittedAtUnixMs != want.CommittedAtUnixMs || (got > 0 && recs[got-1].CommittedAtUnixMs == want.CommittedAtUnixMs) {
				t.Fatalf("OffsetAt(%d): %d, %v; want the first offset of that time, at or before %d", want.CommittedAtUnixMs, got, err, want.Offset)
			}
			steps := bits.Len(uint(len(l.view.Load().sealed) + 1))
			if bound := steps + 6; reads > bound {
				t.Fatalf("%d-byte segments: %d reads for one seek over %d records in %d segments: more than %d",
					c.segmentBytes, reads, len(recs), len(l.view.Load().sealed)+1, bound)
			}
			t.Logf("%d-byte segments, %d records: %d reads for one seek", c.segmentBytes, len(recs), reads)
		})
	}
}

// TestTimeIndex_RebuiltWhenMissingOrDamaged: a segment whose index file is
// gone (a crash before it reached the disk, an older build) or damaged
// is walked once at its first seek, the answers stay exact, and the file
// is written again for the next open.
func TestTimeIndex_RebuiltWhenMissingOrDamaged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, opts, recs, sealed := sealedLog(t, 6)
		if err := d.Remove(timeIndexPath(testDir, sealed[1].base)); err != nil {
			t.Fatal(err)
		}
		if err := d.Damage(timeIndexPath(testDir, sealed[3].base), 30, []byte{0xff}); err != nil {
			t.Fatal(err)
		}
		l := openLog(t, opts)
		defer closeLog(t, l)
		checkSeeks(t, l, recs)
		settle(t, l)
		for _, seg := range []*segment{sealed[1], sealed[3]} {
			if x, err := timeIndexFile(d, seg.base); err != nil || x.SegmentSize != seg.sealedSize {
				t.Fatalf("segment %d: index not written again: %+v, %v", seg.base, x, err)
			}
		}
	})
}

// TestTimeIndex_ALyingIndexCostsReadsNotAnswers: an index file with a
// valid checksum whose times or positions are wrong (a bug, a file from
// elsewhere) is checked before it is used: every entry against its frame,
// the range it names against the records at its ends, so every answer is
// still exact.
func TestTimeIndex_ALyingIndexCostsReadsNotAnswers(t *testing.T) {
	for name, lie := range map[string]func(recs []ReadRecord) func(int, *wire.TimeIndexEntry){
		"times": func(recs []ReadRecord) func(int, *wire.TimeIndexEntry) {
			return func(i int, e *wire.TimeIndexEntry) {
				// Early, late, all equal, off by a second: each segment
				// lies its own way.
				e.TimeMs = [...]int64{e.TimeMs - 3, e.TimeMs + 3, recs[0].CommittedAtUnixMs, e.TimeMs + 1000}[i%4]
			}
		},
		"positions": func([]ReadRecord) func(int, *wire.TimeIndexEntry) {
			return func(_ int, e *wire.TimeIndexEntry) { e.Offset++ } // the frame's second record, at its first's byte
		},
	} {
		synctest.Test(t, func(t *testing.T) {
			d, opts, recs, sealed := sealedLog(t, 4)
			rewriteTimeIndexes(t, d, sealed, lie(recs))
			l := openLog(t, opts)
			defer closeLog(t, l)
			t.Logf("lying %s", name)
			checkSeeks(t, l, recs)
		})
	}
}

// TestTimeIndex_NeverOutlivesItsSegment: retention removes a segment's
// time index with it (the index first), and a failed index unlink keeps
// the segment for the next sweep.
func TestTimeIndex_NeverOutlivesItsSegment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		l := openLog(t, testOptions(d))
		defer closeLog(t, l)
		fillSegments(t, l, 6)
		if _, err := l.SetRetention(bg, 0, 8<<10); err != nil {
			t.Fatal(err)
		}
		oldest := l.view.Load().sealed[0]
		in := d.Inject(sim.Fault{Op: sim.OpRemove, Path: timeIndexPath(testDir, oldest.base), Nth: 1, Err: syscall.EIO})
		if _, err := l.Sweep(bg); !errors.Is(err, syscall.EIO) {
			t.Fatalf("sweep with a failing index unlink: %v", err)
		}
		in.Remove()
		if _, err := d.Contents(oldest.path); err != nil {
			t.Fatalf("the segment went before its index: %v", err)
		}
		res, err := l.Sweep(bg)
		if err != nil || res.DeletedSegments == 0 {
			t.Fatalf("sweep: %+v, %v", res, err)
		}
		entries, err := d.ReadDir(testDir)
		if err != nil {
			t.Fatal(err)
		}
		segments := map[string]bool{}
		for _, e := range entries {
			if base, ok := strings.CutSuffix(e.Name, wire.SegmentFileSuffix); ok {
				segments[base] = true
			}
		}
		for _, e := range entries {
			if base, ok := strings.CutSuffix(e.Name, wire.TimeIndexFileSuffix); ok && !segments[base] {
				t.Fatalf("%s outlived its segment", path.Join(testDir, e.Name))
			}
		}
	})
}

// TestTimeIndex_AFailedWriteIsNotAFailedRoll: the index is derived data;
// a write that fails (ENOSPC here) is counted and logged, the commit that
// rolled succeeds, and the first seek builds and writes the index.
func TestTimeIndex_AFailedWriteIsNotAFailedRoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := testOptions(d)
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
		l := openLog(t, opts)
		defer closeLog(t, l)
		in := d.Inject(sim.Fault{Op: sim.OpWrite, Path: testDir + "/*" + wire.TimeIndexFileSuffix + "*", Sticky: true, Nth: 1, Err: syscall.ENOSPC})
		recs := fillSegments(t, l, 3)
		in.Remove()
		if n := testutil.ToFloat64(opts.Metrics.Errors.WithLabelValues("storage", kindTimeIndex)); n < 3 {
			t.Fatalf("errors_total{kind=time_index} = %v, want a count per sealed segment", n)
		}
		sealed := l.view.Load().sealed
		if _, err := timeIndexFile(d, sealed[0].base); err == nil {
			t.Fatal("a time index was written through ENOSPC")
		}
		checkSeeks(t, l, recs)
		settle(t, l)
		for _, seg := range sealed {
			if _, err := timeIndexFile(d, seg.base); err != nil {
				t.Fatalf("segment %d: not written by the seek: %v", seg.base, err)
			}
		}
	})
}

// TestCommitTimes_NeverDecreaseAcrossAReopen: a log reopened under a clock
// that went back (a restart after an NTP step) raises new records' times to
// the last record's, whether the active segment holds it or, when the
// commit that filled a segment sealed it, the newest sealed segment does.
func TestCommitTimes_NeverDecreaseAcrossAReopen(t *testing.T) {
	for _, emptyActive := range []bool{false, true} {
		d := newDisk(t, 1)
		opts := testOptions(d)
		l := openLog(t, opts) // outside a bubble: today's clock
		seq := int64(0)
		for len(l.view.Load().sealed) < 2 || (l.HighWatermark() == l.view.Load().active.base) != emptyActive {
			if _, err := l.Produce(bg, records(1, seq, 3)); err != nil {
				t.Fatal(err)
			}
			seq += 3
		}
		closeLog(t, l)
		synctest.Test(t, func(t *testing.T) { // the bubble's clock starts in 2000
			l := openLog(t, opts)
			defer closeLog(t, l)
			if empty := l.view.Load().active.base == l.HighWatermark(); empty != emptyActive {
				t.Fatalf("active segment empty at open: %v, want %v", empty, emptyActive)
			}
			if _, err := l.Produce(bg, records(1, seq, 2)); err != nil {
				t.Fatal(err)
			}
			recs, _ := readAll(t, l)
			for i := 1; i < len(recs); i++ {
				if recs[i].CommittedAtUnixMs < recs[i-1].CommittedAtUnixMs {
					t.Fatalf("empty active segment %v: offset %d committed at %d, before offset %d at %d",
						emptyActive, recs[i].Offset, recs[i].CommittedAtUnixMs, recs[i-1].Offset, recs[i-1].CommittedAtUnixMs)
				}
			}
		})
	}
}
