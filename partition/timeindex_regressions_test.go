package partition

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// writeTimeIndexFile replaces the time index file of the segment at base
// with x, checksummed, as a bug or a file from elsewhere could leave it.
func writeTimeIndexFile(t *testing.T, d *sim.Disk, x wire.TimeIndex) {
	t.Helper()
	b, err := wire.EncodeTimeIndex(x)
	if err != nil {
		t.Fatal(err)
	}
	name := timeIndexPath(testDir, x.SegmentBase)
	d.Remove(name)
	f, err := d.OpenFile(name, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// rewriteTimeIndexes rewrites the time index file of each segment with
// lie applied to every entry (i is the segment's place in segs).
func rewriteTimeIndexes(t *testing.T, d *sim.Disk, segs []*segment, lie func(i int, e *wire.TimeIndexEntry)) {
	t.Helper()
	for i, seg := range segs {
		x, err := timeIndexFile(d, seg.base)
		if err != nil {
			t.Fatal(err)
		}
		for j := range x.Entries {
			lie(i, &x.Entries[j])
		}
		writeTimeIndexFile(t, d, x)
	}
}

// fillUntilActiveEmpty produces batches of 3 until the log has two sealed
// segments and its active segment holds no frame (the commit that filled a
// segment sealed it), and returns the next sequence number.
func fillUntilActiveEmpty(t *testing.T, l *Log, wait bool) int64 {
	t.Helper()
	seq := int64(0)
	for len(l.view.Load().sealed) < 2 || l.HighWatermark() != l.view.Load().active.base {
		if wait {
			<-time.After(time.Millisecond)
		}
		if _, err := l.Produce(bg, records(1, seq, 3)); err != nil {
			t.Fatal(err)
		}
		seq += 3
	}
	return seq
}

// checkNonDecreasing fails unless commit times never decrease along recs.
func checkNonDecreasing(t *testing.T, recs []ReadRecord) {
	t.Helper()
	for i := 1; i < len(recs); i++ {
		if recs[i].CommittedAtUnixMs < recs[i-1].CommittedAtUnixMs {
			t.Fatalf("offset %d committed at %d, before offset %d at %d",
				recs[i].Offset, recs[i].CommittedAtUnixMs, recs[i-1].Offset, recs[i-1].CommittedAtUnixMs)
		}
	}
}

// TestTimeIndex_ALyingPositionNeverFailsAGoodRead: a time index whose
// checksum, base and size are right but whose (offset, byte) pairs are
// wrong costs reads, never answers: only entries whose frame checks out
// seed the segment's sparse index, so no later read resyncs past good
// records.
func TestTimeIndex_ALyingPositionNeverFailsAGoodRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, opts, recs, sealed := sealedLog(t, 4)
		seg := sealed[1]
		// Each entry names its frame's second record, at its first's byte.
		rewriteTimeIndexes(t, d, []*segment{seg}, func(_ int, e *wire.TimeIndexEntry) { e.Offset++ })
		l := openLog(t, opts)
		defer closeLog(t, l)
		var inSeg []ReadRecord
		for _, r := range recs {
			if r.Offset >= seg.base && r.Offset < sealed[2].base {
				inSeg = append(inSeg, r)
			}
		}
		// One seek into the segment loads (and seeds) its index.
		if _, err := l.OffsetAt(inSeg[len(inSeg)/2].CommittedAtUnixMs); err != nil {
			t.Fatal(err)
		}
		for i := len(inSeg) - 1; i >= 0; i-- { // descending: no frame cached by the read before
			r := inSeg[i]
			res, err := l.Read(r.Offset, 1, 1)
			var unreadable *UnreadableError
			if errors.As(err, &unreadable) {
				t.Fatalf("Read(%d) of an intact record: %v", r.Offset, err)
			}
			if err != nil || len(res.Records) != 1 || res.Records[0].Offset != r.Offset {
				t.Fatalf("Read(%d): %+v, %v", r.Offset, res, err)
			}
		}
	})
}

// TestCommitTimes_AnIndexTimeIsNeverTheFloor: the floor of a log whose
// active segment is empty is the newest sealed segment's last readable
// record; a time index's times are never taken for it, so a lying one
// cannot stamp later records a year into the future.
func TestCommitTimes_AnIndexTimeIsNeverTheFloor(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d)
	l := openLog(t, opts)
	seq := fillUntilActiveEmpty(t, l, false)
	newest := l.view.Load().sealed[len(l.view.Load().sealed)-1]
	closeLog(t, l)
	x, err := timeIndexFile(d, newest.base)
	if err != nil {
		t.Fatal(err)
	}
	year := int64(365 * 24 * time.Hour / time.Millisecond)
	x.Entries[len(x.Entries)-1].TimeMs += year
	writeTimeIndexFile(t, d, x)

	l = openLog(t, opts)
	defer closeLog(t, l)
	before := time.Now().UnixMilli()
	base, err := l.Produce(bg, records(1, seq, 1))
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Read(base, 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Records[0].CommittedAtUnixMs; got > before+time.Minute.Milliseconds() {
		t.Fatalf("record produced at %d stamped %d: %v in the future, from a lying time index",
			before, got, time.Duration(got-before)*time.Millisecond)
	}
}

// TestCommitTimes_AFailedFloorReadRefusesTheAppend: a transient failure to
// read the floor at the first append (EMFILE: the process at its
// descriptor limit) refuses that append, and the next one reads the floor:
// no record is stamped under a floor nobody read.
func TestCommitTimes_AFailedFloorReadRefusesTheAppend(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d)
	l := openLog(t, opts) // outside a bubble: today's clock
	seq := fillUntilActiveEmpty(t, l, false)
	newest := l.view.Load().sealed[len(l.view.Load().sealed)-1]
	closeLog(t, l)
	synctest.Test(t, func(t *testing.T) { // the bubble's clock starts in 2000
		l := openLog(t, opts)
		defer closeLog(t, l)
		in := d.Inject(sim.Fault{Op: sim.OpOpen, Path: newest.path, Nth: 1, Err: syscall.EMFILE})
		if _, err := l.Produce(bg, records(1, seq, 2)); err != nil {
			t.Log("first produce:", err) // refusing is fine; stamping below the floor is not
		} else {
			seq += 2
		}
		in.Remove()
		if _, err := l.Produce(bg, records(1, seq, 2)); err != nil {
			t.Fatal(err)
		}
		recs, _ := readAll(t, l)
		checkNonDecreasing(t, recs)
	})
}

// TestCommitTimes_ADamagedLastFrameLeavesTheReadableFloor: when the newest
// sealed segment's last frame is damaged, the floor is the newest readable
// record's time, read from the frames after the index's last entry, not
// that entry's own time: records committed after the reopen never come
// before readable ones.
func TestCommitTimes_ADamagedLastFrameLeavesTheReadableFloor(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d)
	opts.SegmentMaxBytes = 256 << 10 // an index entry every 256 bytes: every fifth frame or so
	var seq int64
	var newest *segment
	synctest.Test(t, func(t *testing.T) { // a clock in 2000, a millisecond per produce
		l := openLog(t, opts)
		for len(l.view.Load().sealed) < 1 || l.HighWatermark() != l.view.Load().active.base {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, []Record{{Value: []byte{byte(seq)}}}); err != nil {
				t.Fatal(err)
			}
			seq++
		}
		newest = l.view.Load().sealed[len(l.view.Load().sealed)-1]
		closeLog(t, l)
	})
	x, err := timeIndexFile(d, newest.base)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Contents(newest.path)
	if err != nil {
		t.Fatal(err)
	}
	last := int64(0)
	for pos := int64(0); pos < int64(len(b)); {
		h, err := wire.CheckFrame(b[pos:])
		if err != nil {
			t.Fatal(err)
		}
		last, pos = pos, pos+h.FrameLen()
	}
	if x.Entries[len(x.Entries)-1].Pos >= last-int64(2*60) {
		t.Fatalf("the index's last entry is at byte %d, the last frame at %d: not sparse enough for this test", x.Entries[len(x.Entries)-1].Pos, last)
	}
	if err := d.Damage(newest.path, last+wire.FrameHeaderSize+2, []byte{0xde, 0xad}); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) { // the clock starts in 2000 again: it went back
		l := openLog(t, opts)
		defer closeLog(t, l)
		if _, err := l.Produce(bg, records(1, seq, 1)); err != nil {
			t.Fatal(err)
		}
		recs, _ := readAll(t, l)
		checkNonDecreasing(t, recs)
	})
}

// TestOffsetAt_RacingRollsAndRetention: seeks over sealed segments (loading, building and caching time
// indexes, seeding sparse indexes) while the actor produces, rolls and
// retention detaches and unlinks, and the hot set churns. Every answer is
// checked against the records it could name; run with -race.
func TestOffsetAt_RacingRollsAndRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := testOptions(d)
		l := openLog(t, opts)
		defer closeLog(t, l)
		fillSegments(t, l, 6)
		// Half the indexes gone: seeks build them and ask the actor to write.
		for i, seg := range l.view.Load().sealed {
			if i%2 == 0 {
				d.Remove(timeIndexPath(testDir, seg.base))
			}
		}
		if _, err := l.SetRetention(bg, 0, 24<<10); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		errs := make(chan error, 8)
		for r := range 3 {
			go func() {
				for i := 0; ; i++ {
					select {
					case <-done:
						errs <- nil
						return
					default:
					}
					v := l.view.Load()
					lo := v.start
					if lo >= v.hwm {
						continue
					}
					res, err := l.Read(lo+int64((i*7+r)%int(v.hwm-lo)), 1, 1)
					if err != nil {
						var unreadable *UnreadableError
						if errors.As(err, &unreadable) || (!errors.Is(err, ErrOffsetDeleted) && !errors.Is(err, ErrLogClosed)) {
							errs <- err
							return
						}
						continue
					}
					at := res.Records[0].CommittedAtUnixMs
					got, err := l.OffsetAt(at)
					if err != nil {
						errs <- err
						return
					}
					if got > res.Records[0].Offset && l.StartOffset() <= res.Records[0].Offset {
						errs <- fmt.Errorf("OffsetAt(%d) = %d, past offset %d committed then", at, got, res.Records[0].Offset)
						return
					}
					<-time.After(time.Microsecond)
				}
			}()
		}
		seq := int64(1 << 20)
		for range 48 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, records(1, seq, 2)); err != nil {
				t.Fatal(err)
			}
			seq += 2
			if seq%16 == 0 {
				if _, err := l.Sweep(bg); err != nil {
					t.Fatal(err)
				}
			}
		}
		close(done)
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
}
