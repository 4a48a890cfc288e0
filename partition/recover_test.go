package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const activeSeg = testDir + "/00000000000000000000.log"

// framePositions lists the byte positions of the frames of a segment
// image, walking its headers.
func framePositions(t *testing.T, b []byte) []int64 {
	t.Helper()
	var out []int64
	for pos := int64(0); pos < int64(len(b)); {
		h, err := wire.CheckFrame(b[pos:])
		if err != nil {
			t.Fatalf("frame at %d: %v", pos, err)
		}
		out = append(out, pos)
		pos += h.FrameLen()
	}
	return out
}

// committedLog makes a log of n commits of 2 records each in one 64 KiB
// segment, closes it, and returns the disk and the frame positions.
func committedLog(t *testing.T, n int) (*sim.Disk, []int64) {
	t.Helper()
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d, SegmentMaxBytes: 64 << 10})
	for i := range n {
		if _, err := l.Produce(bg, records(1, int64(2*i), 2)); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	return d, framePositions(t, contentsOf(t, d, activeSeg))
}

func contentsOf(t *testing.T, d *sim.Disk, name string) []byte {
	t.Helper()
	b, err := d.Contents(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func emptyHWM(t *testing.T, d *sim.Disk) {
	t.Helper()
	if err := emptyHWMFile(d, testDir); err != nil {
		t.Fatal(err)
	}
}

// TestRecovery_TornTailTruncated: a partly written last frame (every
// prefix of its bytes) is truncated and the truncate fsynced; no gap; the
// next commit reuses its offsets (docs/design.md, "Recovery"; matrix
// rows 2 and 5).
func TestRecovery_TornTailTruncated(t *testing.T) {
	d, pos := committedLog(t, 5)
	full := contentsOf(t, d, activeSeg)
	last := pos[len(pos)-1]
	cuts := []int64{last + 1, last + wire.FrameHeaderSize - 1, last + wire.FrameHeaderSize, int64(len(full)) - 1}
	for _, cut := range cuts {
		for _, zeroFill := range []bool{false, true} {
			name := fmt.Sprintf("cut=%d/zeros=%v", cut, zeroFill)
			img := d.ProcessCrash()
			f, _ := img.OpenFile(activeSeg, 2)
			if zeroFill { // the size reached the disk, the data did not
				f.WriteAt(make([]byte, int64(len(full))-cut), cut)
			} else {
				f.Truncate(cut)
			}
			f.Sync()
			f.Close()
			emptyHWM(t, img)
			metrics := NewMetrics(prometheus.NewRegistry())
			l := openLog(t, Options{FS: img, SegmentMaxBytes: 64 << 10, Metrics: metrics})
			if l.HighWatermark() != 8 {
				t.Fatalf("%s: high watermark %d, want 8", name, l.HighWatermark())
			}
			if got := testutil.ToFloat64(metrics.tornTails); got != 1 {
				t.Fatalf("%s: torn tails counted %v, want 1", name, got)
			}
			if img.Pending(activeSeg) {
				t.Fatalf("%s: the torn-tail truncate was not fsynced", name)
			}
			if size := int64(len(contentsOf(t, img, activeSeg))); size != last {
				t.Fatalf("%s: segment is %d bytes after recovery, want %d", name, size, last)
			}
			if base, err := l.Produce(bg, records(1, 8, 2)); err != nil || base != 8 {
				t.Fatalf("%s: next commit = %d, %v", name, base, err)
			}
			checkExactlyOnce(t, name, l, 1, 10)
			closeLog(t, l)
		}
	}
}

// TestRecovery_DamageUnderValidFramesIsAGap: a bit flip in a middle frame
// of the active segment (each header field and the payload in turn) is
// skipped as a permanent gap with its offset range; the later frames are
// served; a second open is identical (matrix row 6).
func TestRecovery_DamageUnderValidFramesIsAGap(t *testing.T) {
	d, pos := committedLog(t, 5)
	victim := pos[2] // offsets 4 and 5
	for _, at := range []int64{2, 3, 7, 14, 15, 19, 23, wire.FrameHeaderSize + 3} {
		name := fmt.Sprintf("byte %d of the frame", at)
		img := d.ProcessCrash()
		b := contentsOf(t, img, activeSeg)
		img.Damage(activeSeg, victim+at, []byte{b[victim+at] ^ 0x10})
		emptyHWM(t, img)
		var first []string
		for open := range 2 {
			l := openLog(t, Options{FS: img, SegmentMaxBytes: 64 << 10})
			if l.HighWatermark() != 10 {
				t.Fatalf("%s: high watermark %d, want 10", name, l.HighWatermark())
			}
			_, err := l.Read(4, 10, 1<<20)
			var u *UnreadableError
			if !errors.As(err, &u) || u.Next != 6 {
				t.Fatalf("%s: read in the gap = %v, want ErrUnreadable with next 6", name, err)
			}
			res, err := l.Read(2, 10, 1<<20)
			if err != nil || len(res.Records) != 2 || res.Next != 4 {
				t.Fatalf("%s: read up to the gap = %d records next %d, %v; want 2, next 4", name, len(res.Records), res.Next, err)
			}
			recs, gaps := readAll(t, l)
			state := fmt.Sprint(len(recs), gaps)
			if open == 0 {
				first = append(first, state)
			} else if first[0] != state {
				t.Fatalf("%s: second open differs: %s vs %s", name, state, first[0])
			}
			if len(recs) != 8 || fmt.Sprint(gaps) != "[4]" {
				t.Fatalf("%s: %d records, gaps %v; want 8 and [4]", name, len(recs), gaps)
			}
			for _, r := range recs {
				if seq := checkRecord(t, 1, r); seq != r.Offset {
					t.Fatalf("%s: offset %d holds seq %d", name, r.Offset, seq)
				}
			}
			closeLog(t, l)
		}
	}
}

// TestRecovery_HugeLengthNeverAllocates: a header claiming ~4 GiB (or
// 2 GiB) in the last or a middle frame is rejected before any allocation
// (docs/design.md R6, matrix row 11).
func TestRecovery_HugeLengthNeverAllocates(t *testing.T) {
	d, pos := committedLog(t, 5)
	for _, victim := range []int64{pos[2], pos[4]} {
		for _, field := range []struct {
			at    int64
			value uint32
		}{{19, 0xFFFFFFF0}, {15, 0xFFFFFFF0}, {19, 0x7FFFFFF0}, {3, 0x7FFFFFFF}} {
			img := d.ProcessCrash()
			var v [4]byte
			binary.BigEndian.PutUint32(v[:], field.value)
			img.Damage(activeSeg, victim+field.at, v[:])
			emptyHWM(t, img)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			l := openLog(t, Options{FS: img, SegmentMaxBytes: 64 << 10})
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
				t.Fatalf("field at %d = %#x: open allocated %d bytes", field.at, field.value, grew)
			}
			recs, _ := readAll(t, l)
			for _, r := range recs {
				checkRecord(t, 1, r)
			}
			closeLog(t, l)
		}
	}
}

// TestRecovery_MisplacedFrameIsNeverServed: a CRC-valid frame copied to
// another position (a misdirected write) is rejected by the position
// check (docs/design.md R5, matrix row 25).
func TestRecovery_MisplacedFrameIsNeverServed(t *testing.T) {
	d, pos := committedLog(t, 5)
	b := contentsOf(t, d, activeSeg)
	frame0 := append([]byte(nil), b[pos[0]:pos[1]]...)
	for _, target := range []int64{pos[2], pos[4]} {
		img := d.ProcessCrash()
		img.Damage(activeSeg, target, frame0) // same size: every frame holds 2 similar records
		emptyHWM(t, img)
		l := openLog(t, Options{FS: img, SegmentMaxBytes: 64 << 10})
		recs, _ := readAll(t, l)
		for _, r := range recs {
			if seq := checkRecord(t, 1, r); seq != r.Offset {
				t.Fatalf("frame copied to byte %d: offset %d serves seq %d", target, r.Offset, seq)
			}
		}
		closeLog(t, l)
	}
}

// TestRecovery_HWMFileProtocol: close writes the exact boundary; the first
// commit after an open empties the file and fsyncs it; a crash while the
// log is open leaves it empty and the boundary comes from the tail; a
// crash before the first advance keeps the old value, still equal to the
// tail (docs/design.md, "High watermark and hidden tail").
func TestRecovery_HWMFileProtocol(t *testing.T) {
	d, _ := committedLog(t, 3)
	hwmPath := testDir + "/" + wire.HWMFileName
	if got := contentsOf(t, d, hwmPath); fmt.Sprint(got) != fmt.Sprint([]byte{0, 0, 0, 0, 0, 0, 0, 6}) {
		t.Fatalf("hwm file after close = %v, want 6", got)
	}
	l := openLog(t, Options{FS: d, SegmentMaxBytes: 64 << 10})
	// Crash before the first advance: the file still holds 6.
	if got := len(contentsOf(t, d.Crash(sim.CrashPlan{}), hwmPath)); got != 8 {
		t.Fatalf("hwm file before the first advance: %d bytes", got)
	}
	if _, err := l.Produce(bg, records(1, 6, 2)); err != nil {
		t.Fatal(err)
	}
	crashed := d.Crash(sim.CrashPlan{})
	if got := len(contentsOf(t, crashed, hwmPath)); got != 0 || d.Pending(hwmPath) {
		t.Fatalf("hwm file after the first advance: %d bytes (pending %v), want emptied durably", got, d.Pending(hwmPath))
	}
	r := openLog(t, Options{FS: crashed, SegmentMaxBytes: 64 << 10})
	if r.HighWatermark() != 8 {
		t.Fatalf("after a crash: high watermark %d, want the tail 8", r.HighWatermark())
	}
	closeLog(t, r)
	closeLog(t, l)
}

// TestRecovery_DamagedHWMFileNeverHidesRecords: whatever the hwm file
// holds (zeros, all ones, a value above or below the tail, 1 to 7 bytes,
// a bit flip in any byte), the boundary is never below the last honest
// commit (docs/design.md R1, matrix rows 12 and 13).
func TestRecovery_DamagedHWMFileNeverHidesRecords(t *testing.T) {
	d, _ := committedLog(t, 5) // high watermark 10
	cases := map[string][]byte{
		"zeros":    make([]byte, 8),
		"ones":     {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"above":    {0, 0, 0, 0, 0, 0, 0, 20},
		"below":    {0, 0, 0, 0, 0, 0, 0, 4},
		"9 bytes":  {0, 0, 0, 0, 0, 0, 0, 0, 10},
		"negative": {0x80, 0, 0, 0, 0, 0, 0, 10},
	}
	for n := 1; n < 8; n++ {
		cases[fmt.Sprintf("%d bytes", n)] = make([]byte, n)
	}
	for i := range 64 {
		b := []byte{0, 0, 0, 0, 0, 0, 0, 10}
		b[i/8] ^= 1 << (i % 8)
		cases[fmt.Sprintf("bit %d", i)] = b
	}
	for name, content := range cases {
		img := d.ProcessCrash()
		if err := vfs.WriteFileAtomic(img, testDir+"/"+wire.HWMFileName, content); err != nil {
			t.Fatal(err)
		}
		l := openLog(t, Options{FS: img, SegmentMaxBytes: 64 << 10})
		if l.HighWatermark() != 10 {
			t.Fatalf("%s: high watermark %d, want 10", name, l.HighWatermark())
		}
		closeLog(t, l)
	}
}

// TestClose_CutsTheHiddenTail: records written above the boundary (drained,
// never committed) are cut at close, so the boundary written equals the
// tail and the next open trusts it without an fsync.
func TestClose_CutsTheHiddenTail(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d)
	opts.SegmentMaxBytes = 64 << 10
	opts.flush = defaultFlushPolicy
	opts.flush.drainRecords = 2
	l := openLog(t, opts)
	if _, err := l.Produce(bg, records(1, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(bg, records(1, 3, 2)); err != nil { // drained and written, never committed
		t.Fatal(err)
	}
	closeLog(t, l)
	var syncs int
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpSync {
			syncs++
		}
		return nil
	})
	r := openLog(t, opts)
	d.SetHook(nil)
	defer closeLog(t, r)
	if r.HighWatermark() != 3 || syncs != 0 {
		t.Fatalf("reopen: high watermark %d with %d fsyncs; want 3 and none", r.HighWatermark(), syncs)
	}
	if base, err := r.Produce(bg, records(1, 3, 2)); err != nil || base != 3 {
		t.Fatalf("produce after reopen = %d, %v", base, err)
	}
	checkExactlyOnce(t, "after reopen", r, 1, 5)
}

// TestRecovery_CrashInsideRecovery: a crash at any write recovery makes
// (the torn-tail truncate, its fsync, the fsync of the active segment)
// leads the next open to the same state (docs/design.md R8, matrix row 27).
func TestRecovery_CrashInsideRecovery(t *testing.T) {
	d, pos := committedLog(t, 5)
	base := d.ProcessCrash()
	f, _ := base.OpenFile(activeSeg, 2)
	f.Truncate(pos[4] + 10) // torn last frame
	f.Sync()
	f.Close()
	emptyHWM(t, base)
	want := recoveredState(t, base.ProcessCrash())
	for stop := 1; ; stop++ {
		img := base.ProcessCrash()
		calls := 0
		var crashed []*sim.Disk
		img.SetHook(func(c sim.Call) error {
			switch c.Op {
			case sim.OpTruncate, sim.OpSync, sim.OpWrite, sim.OpSyncDir:
				calls++
				if calls == stop {
					crashed = append(crashed, img.Crash(sim.CrashPlan{}), img.Crash(sim.CrashPlan{Data: sim.KeepUnsynced}),
						img.Crash(sim.CrashPlan{Data: sim.TearUnsynced, Seed: uint64(stop)}))
					return errors.New("crash")
				}
			}
			return nil
		})
		l, err := Open(testDir, Options{FS: img, SegmentMaxBytes: 64 << 10})
		if err == nil {
			l.Close()
		}
		if crashed == nil {
			break // recovery made fewer than stop writes
		}
		for i, c := range crashed {
			if got := recoveredState(t, c); got != want {
				t.Fatalf("crash at recovery write %d, plan %d: state %s, want %s", stop, i, got, want)
			}
		}
	}
}

func recoveredState(t *testing.T, d *sim.Disk) string {
	t.Helper()
	l := openLog(t, Options{FS: d, SegmentMaxBytes: 64 << 10})
	defer closeLog(t, l)
	recs, gaps := readAll(t, l)
	return fmt.Sprintf("hwm=%d records=%d gaps=%v", l.HighWatermark(), len(recs), gaps)
}

// TestRecovery_ReadErrorFailsOpenThenRecovers: an I/O error reading the
// active segment during recovery fails the open with that error (no
// panic, no loop); once it clears, the open succeeds (matrix row 10).
func TestRecovery_ReadErrorFailsOpenThenRecovers(t *testing.T) {
	d, _ := committedLog(t, 5)
	emptyHWM(t, d)
	in := d.Inject(sim.Fault{Op: sim.OpRead, Path: activeSeg, Err: syscall.EIO})
	if _, err := Open(testDir, Options{FS: d, SegmentMaxBytes: 64 << 10}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("open with a failing read: %v, want EIO", err)
	}
	if d.OpenFiles() != 0 {
		t.Fatalf("a failed open left %d files open", d.OpenFiles())
	}
	in.Remove()
	l := openLog(t, Options{FS: d, SegmentMaxBytes: 64 << 10})
	checkExactlyOnce(t, "after the fault cleared", l, 1, 10)
	closeLog(t, l)
}

// TestRecovery_FrameInsideATornRecordIsNeverServed: a record value may
// hold bytes that form a valid frame; when the frame holding it is torn,
// recovery never takes those bytes for a later frame (I1).
func TestRecovery_FrameInsideATornRecordIsNeverServed(t *testing.T) {
	for _, claim := range []int64{1, 2, 1000} {
		d := newDisk(t, 1)
		l := openLog(t, Options{FS: d, SegmentMaxBytes: 64 << 10})
		if _, err := l.Produce(bg, []Record{{Value: []byte("honest")}}); err != nil {
			t.Fatal(err)
		}
		env, _ := wire.AppendEnvelope(nil, []byte("evil"), 1, []byte("fabricated"))
		payload, _ := wire.AppendRecordFrame(nil, env)
		inner, _ := wire.AppendFrame(nil, wire.CodecNone, claim, 1, len(payload), payload)
		value := append(append([]byte("prefix"), inner...), make([]byte, 100)...)
		if _, err := l.Produce(bg, []Record{{Value: value}}); err != nil {
			t.Fatal(err)
		}
		closeLog(t, l)
		b := contentsOf(t, d, activeSeg)
		img := d.ProcessCrash()
		f, _ := img.OpenFile(activeSeg, 2)
		f.Truncate(int64(len(b)) - 50) // tear the last frame inside its trailing bytes
		f.Sync()
		f.Close()
		emptyHWM(t, img)
		r := openLog(t, Options{FS: img, SegmentMaxBytes: 64 << 10})
		recs, gaps := readAll(t, r)
		if r.HighWatermark() != 1 || len(recs) != 1 || len(gaps) != 0 || string(recs[0].Value) != "honest" {
			t.Fatalf("claim %d: high watermark %d, records %d, gaps %v: a frame inside a torn record was served", claim, r.HighWatermark(), len(recs), gaps)
		}
		closeLog(t, r)
	}
}
