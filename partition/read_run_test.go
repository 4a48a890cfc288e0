package partition

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// Runs of one-record frames (lendOneRecordRun): a lending read serves a
// trickle-fed partition's frames from its window in one loop. These tests
// hold it to what the general path serves, at a run's every edge.

// oneRecordRunsLog writes runs of one-record frames (hundreds, across
// several windows) between frames of many into segments of 1 MiB, and
// reopens the log, so nothing is cached.
func oneRecordRunsLog(t *testing.T, d *sim.Disk, id codec.ID) *Log {
	t.Helper()
	return writtenLog(t, d, id, 1<<20, []frameBatch{
		{700, 1, 300}, {1, 5, 300}, {3, 1, 40}, {1, 900, 200}, {900, 1, 500}, {1, 2, 10}, {50, 1, 300},
	})
}

// lendFrom is what ReadFunc lends from offset under the limits, copied
// out, with its summary.
func lendFrom(l *Log, from int64, maxRecords, maxBytes int) ([]ReadRecord, ReadSummary, error) {
	var lent []ReadRecord
	sum, err := l.ReadFunc(from, maxRecords, maxBytes, func(r ReadRecord) error {
		lent = append(lent, copyRecord(r))
		return nil
	})
	return lent, sum, err
}

// TestReadFunc_ARunOfOneRecordFramesLendsWhatReadReturns: from offsets
// inside, at the start of and just before a run, under limits that stop
// a read inside a run, ReadFunc lends exactly what Read (which never
// takes the run's loop) returns, with the same Next, and what was written.
func TestReadFunc_ARunOfOneRecordFramesLendsWhatReadReturns(t *testing.T) {
	for _, id := range []codec.ID{codec.None, codec.Zstd} {
		d := newDisk(t, 1)
		l := oneRecordRunsLog(t, d, id)
		checkLendsWhatReadReturns(t, l, []readLimits{{1, 1 << 30}, {2, 1 << 30}, {333, 1 << 30}, {1 << 20, 1000}, {1 << 20, 100 << 10}, {1 << 20, 1 << 30}},
			[]int64{0, 1, 350, 699, 700, 705, 706, 708, 1607, 1608, 2000, 2509, 2511, 2560, l.HighWatermark() - 1})
		closeLog(t, l)
	}
}

// TestReadFunc_ARunStopsWhereFnRefuses: fn's error inside a run ends the
// read with Next at the record refused.
func TestReadFunc_ARunStopsWhereFnRefuses(t *testing.T) {
	d := newDisk(t, 1)
	l := oneRecordRunsLog(t, d, codec.None)
	defer closeLog(t, l)
	checkARefusalEndsTheRead(t, l, 10, []int{1, 2, 150, 600})
}

// TestReadFunc_ARunNeverLendsADamagedFrame: a one-record frame inside a
// run whose bytes rotted (CRC), whose CRC checks out over a record that
// does not parse (a writer's bug) or over a base offset that does not
// follow its predecessor's, ends a read that meets it past its first
// frame just before it; a read of its own offset is UnreadableError, and
// the frames after it are served.
func TestReadFunc_ARunNeverLendsADamagedFrame(t *testing.T) {
	for _, damage := range []string{"rot", "unparsable", "rebased"} {
		t.Run(damage, func(t *testing.T) {
			d := newDisk(t, 1)
			l := oneRecordRunsLog(t, d, codec.None)
			closeLog(t, l)
			const victim = 500 // inside the first run, past its first windows
			name := testDir + "/00000000000000000000.log"
			seg, err := d.Contents(name)
			if err != nil {
				t.Fatal(err)
			}
			pos := int64(0)
			for range victim {
				h, err := wire.CheckFrame(seg[pos:])
				if err != nil {
					t.Fatal(err)
				}
				pos += h.FrameLen()
			}
			h, err := wire.CheckFrame(seg[pos:])
			if err != nil || h.BaseOffset != victim || h.RecordCount != 1 {
				t.Fatalf("frame at byte %d: %+v, %v", pos, h, err)
			}
			frame := bytes.Clone(seg[pos : pos+h.FrameLen()])
			frame[len(frame)-1] ^= 0xff // the value's last byte: the CRC no longer matches
			switch damage {
			case "unparsable":
				frame[wire.FrameHeaderSize+4] ^= 0xff // the envelope's version byte, under a good CRC
				if frame, err = wire.AppendFrame(nil, h.Codec, h.BaseOffset, 1, int(h.UncompressedSize), frame[wire.FrameHeaderSize:]); err != nil {
					t.Fatal(err)
				}
			case "rebased":
				if frame, err = wire.AppendFrame(nil, h.Codec, 100_000, 1, int(h.UncompressedSize), h.Stored(seg[pos:])); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Damage(name, pos, frame); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, Options{FS: d, SegmentMaxBytes: 1 << 20})
			defer closeLog(t, l)
			lent, sum, err := lendFrom(l, 3, 1<<20, 1<<30)
			if err != nil || sum.Next != victim || len(lent) != victim-3 || lent[len(lent)-1].Offset != victim-1 {
				t.Fatalf("read from 3: %d lent, next %d, %v; want the %d records before offset %d", len(lent), sum.Next, err, victim-3, victim)
			}
			var unreadable *UnreadableError
			if _, _, err := lendFrom(l, victim, 1<<20, 1<<30); !errors.As(err, &unreadable) || unreadable.Next != victim+1 {
				t.Fatalf("read of the damaged frame: %v", err)
			}
			if lent, _, err := lendFrom(l, victim+1, 10, 1<<30); err != nil || len(lent) != 10 || lent[0].Offset != victim+1 {
				t.Fatalf("read past the damaged frame: %d lent, %v", len(lent), err)
			}
		})
	}
}

// TestReadFunc_ARunRemembersWhereItStopped: a read that fills up inside a
// run leaves the position of the frame after its last record in the
// frame-position cache, as the general path does, and caches no frame
// it never stopped inside.
func TestReadFunc_ARunRemembersWhereItStopped(t *testing.T) {
	d := newDisk(t, 1)
	l := oneRecordRunsLog(t, d, codec.None)
	defer closeLog(t, l)
	if _, sum, err := lendFrom(l, 3, 100, 1<<30); err != nil || sum.Next != 103 {
		t.Fatalf("read of 100 from 3: next %d, %v", sum.Next, err)
	}
	seg, err := d.Contents(testDir + "/00000000000000000000.log")
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	for range 103 {
		h, err := wire.CheckFrame(seg[want:])
		if err != nil {
			t.Fatal(err)
		}
		want += h.FrameLen()
	}
	s, _, _ := l.view.Load().segmentFor(103)
	if got, ok := l.cache.position(s, 103); !ok || got != want {
		t.Fatalf("remembered position of offset 103: %d (%v), want byte %d", got, ok, want)
	}
	if f := l.cache.get(103, false); f != nil {
		t.Fatalf("frame of offset 103 cached, though the read stopped before it")
	}
}

// TestLendOneRecordRun_StaysInsideTheWindow: the run lends only frames
// the window's bytes hold whole, though the buffer past them holds valid
// frames (a pooled buffer's earlier contents) and the scan's limit is
// further on; and a frame the window cuts costs no allocation (an error
// built for it did, once per window).
func TestLendOneRecordRun_StaysInsideTheWindow(t *testing.T) {
	var buf []byte
	var ends []int
	for i := range 10 {
		env, err := wire.AppendEnvelope(nil, nil, 1, bigValue(int64(i), 50))
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := wire.AppendRecordFrame(nil, env)
		if buf, err = wire.AppendFrame(buf, wire.CodecNone, int64(i), 1, len(payload), payload); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, len(buf))
	}
	for _, n := range []int{ends[4], ends[4] + 10, ends[5] - 1} { // at a frame's end; inside the next one's header; its body
		sc := &scanner{buf: buf, n: n, limit: int64(len(buf))}
		var got []int64
		rd := reader{maxRecords: 1 << 20, maxBytes: 1 << 30, take: func(r ReadRecord) error { got = append(got, r.Offset); return nil }}
		var last navEntry
		at, next := lendOneRecordRun(sc, &rd, 0, 0, &last)
		if len(got) != 5 || got[4] != 4 || at != int64(ends[4]) || next != 5 || last.base != 4 || last.pos != int64(ends[3]) {
			t.Fatalf("window of %d bytes: lent %v, stopped at byte %d offset %d, last %+v; want 0-4, byte %d, offset 5", n, got, at, next, last, ends[4])
		}
		lent := 0
		rd.take = func(ReadRecord) error { lent++; return nil }
		if allocs := testing.AllocsPerRun(10, func() {
			rd.records, rd.bytes = 0, 0
			lendOneRecordRun(sc, &rd, 0, 0, &last)
		}); allocs != 0 || lent != 11*5 {
			t.Fatalf("window of %d bytes: %.1f allocations a run, %d records lent in 11 runs", n, allocs, lent)
		}
	}
}

// TestReadFunc_RunsUnderConcurrentCommitsRollsAndRetention: lending
// readers near the high watermark of a trickle-fed log, while one-record
// frames are committed (some commits failing, their offsets reused),
// segments roll and retention deletes, only ever lend the records
// written, in order, up to the high watermark.
func TestReadFunc_RunsUnderConcurrentCommitsRollsAndRetention(t *testing.T) {
	d := newDisk(t, 3)
	l := openLog(t, Options{FS: d, SegmentMaxBytes: 256 << 10, RetentionMaxBytes: 600 << 10})
	defer closeLog(t, l)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		seq := int64(0)
		for i := range 2000 {
			if i%250 == 249 {
				d.Inject(sim.Fault{Op: sim.OpWrite, Path: testDir + "/*.log", Nth: 1, Short: 10, Err: syscall.ENOSPC})
			}
			if _, err := l.Produce(bg, bigRecords(seq, 1, 50+i%300)); err != nil {
				if !errors.Is(err, ErrNoSpace) {
					t.Errorf("produce: %v", err)
					return
				}
				continue
			}
			seq++
			if i%100 == 0 {
				if _, err := l.Sweep(bg); err != nil {
					t.Errorf("sweep: %v", err)
				}
			}
		}
	})
	var failed atomic.Bool
	for r := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for !failed.Load() {
				select {
				case <-done:
					return
				default:
				}
				hwm := l.HighWatermark()
				if hwm == 0 {
					continue
				}
				from := max(l.StartOffset(), hwm-int64(rng.IntN(3000))-1)
				want := from
				sum, err := l.ReadFunc(from, 1+rng.IntN(2000), 1+rng.IntN(200<<10), func(rec ReadRecord) error {
					if rec.Offset != want || !bytes.Equal(rec.Value, bigValue(rec.Offset, len(rec.Value))) {
						return fmt.Errorf("lent offset %d (want %d): %.20q", rec.Offset, want, rec.Value)
					}
					want++
					return nil
				})
				switch {
				case errors.Is(err, ErrOffsetDeleted):
				case err != nil:
					failed.Store(true)
					t.Errorf("ReadFunc(%d): %v", from, err)
				case sum.Next != want || sum.Next > sum.HighWatermark:
					failed.Store(true)
					t.Errorf("from %d: next %d, lent up to %d, high watermark %d", from, sum.Next, want, sum.HighWatermark)
				}
			}
		})
	}
	wg.Wait()
}
