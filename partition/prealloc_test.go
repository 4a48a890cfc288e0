package partition

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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

// preallocOptions: 1 MiB segments (16 KiB steps) on a simulated disk.
func preallocOptions(d *sim.Disk) Options {
	return Options{FS: d, SegmentMaxBytes: 1 << 20, Metrics: NewMetrics(prometheus.NewRegistry())}
}

// segmentSize is the size of the file of the active segment.
func segmentSize(t *testing.T, d *sim.Disk, l *Log) int64 {
	t.Helper()
	fi, err := d.Stat(l.view.Load().active.path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size
}

// TestPrealloc_BusyCommitsOverwriteWrittenBlocks: a partition committing
// often (docs/design.md, "Commit speed") writes zeros ahead of its
// frames, so most of its commits leave the file's size as it was: one
// growth a step, not one a commit.
func TestPrealloc_BusyCommitsOverwriteWrittenBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		l := openLog(t, preallocOptions(d))
		defer closeLog(t, l)
		grew, size := 0, int64(0)
		for i := range 200 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, records(1, int64(i), 1)); err != nil {
				t.Fatal(err)
			}
			if s := segmentSize(t, d, l); s != size {
				grew, size = grew+1, s
			}
		}
		written := l.view.Load().active.size
		if size <= written || size > written+preallocStep(1<<20)+4096 {
			t.Fatalf("file of %d bytes holding %d bytes of frames: want zeros ahead, at most a step", size, written)
		}
		if steps := int(written/preallocStep(1<<20)) + 2; grew > steps+1 {
			t.Fatalf("the file grew at %d of 200 commits, %d bytes of frames: want about one growth a step (%d)", grew, written, steps)
		}
	})
}

// TestPrealloc_AnIdlePartitionHoldsNoExtraSpace: commits seconds apart
// never write ahead: the file ends at its last frame.
func TestPrealloc_AnIdlePartitionHoldsNoExtraSpace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		l := openLog(t, preallocOptions(d))
		defer closeLog(t, l)
		for i := range 10 {
			<-time.After(2 * preallocBusyWithin)
			if _, err := l.Produce(bg, records(1, int64(i), 1)); err != nil {
				t.Fatal(err)
			}
			if size, written := segmentSize(t, d, l), l.view.Load().active.size; size != written {
				t.Fatalf("commit %d: a file of %d bytes for %d bytes of frames", i, size, written)
			}
		}
	})
}

// TestPrealloc_RollAndCloseLeaveExactFiles: every sealed segment ends at
// its last frame (a roll trims the zeros before it seals), and so does
// the active one after a close, so the next open trusts the hwm file.
func TestPrealloc_RollAndCloseLeaveExactFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := preallocOptions(d)
		opts.MaxSegmentAge = 20 * time.Millisecond // rolls by age, with zeros written ahead
		l := openLog(t, opts)
		recs := fillSegments(t, l, 3)
		sealed := l.view.Load().sealed
		closeLog(t, l)
		entries, err := d.ReadDir(testDir)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, e := range entries {
			if !strings.HasSuffix(e.Name, wire.SegmentFileSuffix) {
				continue
			}
			b, _ := d.Contents(testDir + "/" + e.Name)
			end := int64(0)
			for _, f := range framesIn(t, d, testDir+"/"+e.Name) {
				end = f.pos + f.size
			}
			if end != int64(len(b)) {
				t.Fatalf("%s: frames end at byte %d of %d", e.Name, end, len(b))
			}
			checked++
		}
		if checked != len(sealed)+1 {
			t.Fatalf("checked %d segments, want %d", checked, len(sealed)+1)
		}
		l = openLog(t, opts)
		defer closeLog(t, l)
		if got, _ := readAll(t, l); len(got) != len(recs) {
			t.Fatalf("read %d records after reopen, want %d", len(got), len(recs))
		}
	})
}

// TestPrealloc_ZerosACrashLeavesAreTrimmedNotTorn: after a crash, zeros
// written ahead that reached the disk are unwritten space to recovery:
// trimmed, not counted as a torn tail, and every committed record is
// there.
func TestPrealloc_ZerosACrashLeavesAreTrimmedNotTorn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := preallocOptions(d)
		l := openLog(t, opts)
		for i := range 20 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, records(1, int64(i), 1)); err != nil {
				t.Fatal(err)
			}
		}
		if segmentSize(t, d, l) <= l.view.Load().active.size {
			t.Fatal("no zeros ahead of the frames")
		}
		crashed := d.Crash(sim.CrashPlan{Data: sim.KeepUnsynced})
		closeLog(t, l)
		opts.FS = crashed
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
		r := openLog(t, opts)
		defer closeLog(t, r)
		if got := testutil.ToFloat64(opts.Metrics.tornTails); got != 0 {
			t.Fatalf("torn tails counted: %v, want 0: zeros written ahead are not a torn write", got)
		}
		if size, written := segmentSize(t, crashed, r), r.view.Load().active.size; size != written {
			t.Fatalf("after recovery a file of %d bytes for %d bytes of frames", size, written)
		}
		recs, gaps := readAll(t, r)
		if len(recs) != 20 || len(gaps) != 0 || r.HighWatermark() != 20 {
			t.Fatalf("recovered %d records, gaps %v, high watermark %d; want 20, none, 20", len(recs), gaps, r.HighWatermark())
		}
		for _, rec := range recs {
			checkRecord(t, 1, rec)
		}
		if _, err := r.Produce(bg, records(1, 20, 1)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPrealloc_AFailedZeroWriteIsNotAFailedCommit: ENOSPC on the zeros
// costs the step, never the commit; no step is tried again in the
// segment.
func TestPrealloc_AFailedZeroWriteIsNotAFailedCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		l := openLog(t, preallocOptions(d))
		defer closeLog(t, l)
		zeroWrites := 0
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpWrite && strings.HasSuffix(c.Path, ".log") && int64(c.Len) >= preallocStep(1<<20) {
				zeroWrites++
				return syscall.ENOSPC
			}
			return nil
		})
		defer d.SetHook(nil)
		for i := range 50 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, records(1, int64(i), 1)); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
		if zeroWrites != 1 {
			t.Fatalf("%d zero writes tried, want 1 and no more in the segment", zeroWrites)
		}
		if recs, _ := readAll(t, l); len(recs) != 50 {
			t.Fatalf("%d records, want 50", len(recs))
		}
	})
}

// TestWalkSegment_ZerosToTheEndAreUnwrittenNotTorn: zeros from the last
// frame to the end of the file are unwritten space (UnwrittenAt), not
// damage; anything else after them is still a torn tail.
func TestWalkSegment_ZerosToTheEndAreUnwrittenNotTorn(t *testing.T) {
	d := newDisk(t, 1)
	opts := testOptions(d)
	opts.noPrealloc = true
	l := openLog(t, opts)
	if _, err := l.Produce(bg, records(1, 0, 3)); err != nil {
		t.Fatal(err)
	}
	end := l.view.Load().active.size
	path := l.view.Load().active.path
	closeLog(t, l)
	for _, c := range []struct {
		name      string
		tail      []byte
		unwritten bool
	}{
		{"zeros", make([]byte, 3000), true},
		{"zeros, then a byte", append(make([]byte, 3000), 7), false},
	} {
		if err := d.Damage(path, end, c.tail); err != nil {
			t.Fatal(err)
		}
		f, err := d.OpenFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		damaged := 0
		res, err := WalkSegment(f, end+int64(len(c.tail)), 0, nil, func(SegmentDamage) { damaged++ })
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := res.UnwrittenAt == end && res.TornAt < 0 && damaged == 0; got != c.unwritten {
			t.Fatalf("%s: %+v, %d damage reports", c.name, res, damaged)
		}
		if !c.unwritten && res.TornAt != end {
			t.Fatalf("%s: torn at %d, want %d", c.name, res.TornAt, end)
		}
	}
}

// TestPrealloc_LargeFramesReserveBlocksAhead: a busy partition writing
// frames over a quarter of a step reserves blocks for four of them at a
// time (no zeros: they would double its writes), and a close gives back
// what lies past its last frame.
func TestPrealloc_LargeFramesReserveBlocksAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := preallocOptions(d)
		opts.SegmentMaxBytes = 64 << 20
		l := openLog(t, opts)
		var reserved []sim.Call
		var truncates int
		d.SetHook(func(c sim.Call) error {
			switch {
			case c.Op == sim.OpAllocate:
				reserved = append(reserved, c)
			case c.Op == sim.OpTruncate && strings.HasSuffix(c.Path, ".log"):
				truncates++
			}
			return nil
		})
		big := make([]Record, 64)
		for i := range big {
			big[i] = Record{Value: make([]byte, 8<<10)} // a 512 KiB frame, over a quarter of the 1 MiB step
		}
		for range 12 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, big); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(reserved); n < 2 || n > 4 {
			t.Fatalf("%d reservations for 11 busy frames, want one every four frames", n)
		}
		if size, written := segmentSize(t, d, l), l.view.Load().active.size; size != written {
			t.Fatalf("a reservation changed the file's size: %d for %d bytes of frames", size, written)
		}
		closeLog(t, l)
		d.SetHook(nil)
		if truncates == 0 {
			t.Fatal("the close gave back no reserved blocks")
		}
	})
}

// TestPrealloc_ARollKeepsABusyPartitionBusy: a busy partition that rolls
// prepares the space past the frame that opens each new segment, as it
// did in the old one: at 16 MiB frames in 64 MiB segments a roll comes
// every fourth commit, and a segment whose first two frames found no
// blocks reserved cost half the commits their allocation.
func TestPrealloc_ARollKeepsABusyPartitionBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		opts := preallocOptions(d)
		opts.SegmentMaxBytes = 2 << 20 // four 512 KiB frames a segment
		l := openLog(t, opts)
		defer closeLog(t, l)
		writes := map[string]int{}        // frames written to each segment
		reservedAfter := map[string]int{} // frames written when its first reservation came
		d.SetHook(func(c sim.Call) error {
			switch {
			case c.Op == sim.OpWrite && strings.HasSuffix(c.Path, ".log") && c.Len >= 256<<10:
				writes[c.Path]++
			case c.Op == sim.OpAllocate:
				if _, ok := reservedAfter[c.Path]; !ok {
					reservedAfter[c.Path] = writes[c.Path]
				}
			}
			return nil
		})
		big := make([]Record, 64)
		for i := range big {
			big[i] = Record{Value: make([]byte, 8<<10)}
		}
		for range 13 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, big); err != nil {
				t.Fatal(err)
			}
		}
		d.SetHook(nil)
		if len(writes) < 3 {
			t.Fatalf("frames went to %d segments, want rolls", len(writes))
		}
		first := l.view.Load().sealed[0].path
		for path, n := range writes {
			if path == first || n < 2 {
				continue // the first frame of all came when the partition was not busy yet
			}
			if after, ok := reservedAfter[path]; !ok || after != 1 {
				t.Errorf("%s: %d frames, blocks first reserved after frame %d (reserved: %v), want after its first", filepath.Base(path), n, after, ok)
			}
		}
	})
}

// TestPrealloc_AFailedReservationIsNotAFailedCommit: ENOSPC on a
// reservation costs the reservation, never the commit.
func TestPrealloc_AFailedReservationIsNotAFailedCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		l := openLog(t, preallocOptions(d))
		defer closeLog(t, l)
		tried := 0
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpAllocate {
				tried++
				return syscall.ENOSPC
			}
			return nil
		})
		defer d.SetHook(nil)
		big := []Record{{Value: make([]byte, 64<<10)}}
		for i := range 8 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, big); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
		if l.HighWatermark() != 8 || tried != 1 {
			t.Fatalf("high watermark %d after %d reservations tried; want 8 after 1, and no more in the segment", l.HighWatermark(), tried)
		}
	})
}

// TestPrealloc_ZerosNeverTakeTheFramesSpace: on a real file system with
// room for the next frame and not for a step of zeros past it, the commit
// lands: the zeros are written after the frame (a hole under a frame would
// need its blocks after the zeros took them). The simulated disk counts a
// hole as used, so this runs on a 4 MiB tmpfs mounted in a mount namespace
// of the test binary's own (unshare -rm, as the daemon's disk-full test
// does): the test re-runs itself there.
func TestPrealloc_ZerosNeverTakeTheFramesSpace(t *testing.T) {
	root := os.Getenv("NARAD_PREALLOC_TMPFS")
	if root == "" {
		dir := t.TempDir()
		cmd := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=4m tmpfs "$NARAD_PREALLOC_TMPFS" && exec "$0" "$@"`,
			os.Args[0], "-test.run", "^TestPrealloc_ZerosNeverTakeTheFramesSpace$", "-test.count=1")
		cmd.Env = append(os.Environ(), "NARAD_PREALLOC_TMPFS="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("on a tmpfs of its own: %v\n%s", err, out)
		}
		return
	}
	dir := filepath.Join(root, "log")
	l, err := Open(dir, Options{SegmentMaxBytes: 64 << 20}) // 1 MiB steps
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	frame := []Record{{Value: bytes.Repeat([]byte{'v'}, 200<<10)}} // a small frame: zeros after it
	if _, err := l.Produce(bg, frame); err != nil {
		t.Fatal(err)
	}
	filler, err := os.Create(filepath.Join(root, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	var size int64
	for chunk := bytes.Repeat([]byte{1}, 64<<10); ; {
		n, err := filler.Write(chunk)
		size += int64(n)
		if err != nil {
			break // full
		}
	}
	if err := filler.Truncate(size - 600<<10); err != nil { // 600 KiB free: a frame, not a step
		t.Fatal(err)
	}
	if _, err := l.Produce(bg, frame); err != nil { // busy: the step is tried, and fails
		t.Fatalf("a 200 KiB commit with 600 KiB free: %v", err)
	}
}

// TestPrealloc_IdleGivesTheSpaceBack: a busy partition that goes idle
// gives back its zeros once preallocBusyWithin has passed (the flusher's
// timer), and the file keeps its last frame's modification time.
func TestPrealloc_IdleGivesTheSpaceBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		l := openLog(t, preallocOptions(d))
		defer closeLog(t, l)
		for i := range 20 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, records(1, int64(i), 1)); err != nil {
				t.Fatal(err)
			}
		}
		lastWrite := time.Now()
		if segmentSize(t, d, l) <= l.view.Load().active.size {
			t.Fatal("no zeros ahead of the frames")
		}
		<-time.After(2 * preallocBusyWithin)
		synctest.Wait()
		fi, err := d.Stat(l.view.Load().active.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size != l.view.Load().active.size || !fi.ModTime.Equal(lastWrite) {
			t.Fatalf("idle: a file of %d bytes (frames %d), modified %v; want the frames only, modified at the last write %v",
				fi.Size, l.view.Load().active.size, fi.ModTime, lastWrite)
		}
	})
}

// TestPrealloc_AFailedReservationIsGivenBack: blocks a failed reservation
// may have kept (ext4 keeps what it got before ENOSPC) are given back by
// the trim all the same.
func TestPrealloc_AFailedReservationIsGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDisk(t, 1)
		l := openLog(t, preallocOptions(d))
		truncates := 0
		d.SetHook(func(c sim.Call) error {
			switch c.Op {
			case sim.OpAllocate:
				return syscall.ENOSPC
			case sim.OpTruncate:
				truncates++
			}
			return nil
		})
		big := []Record{{Value: make([]byte, 64<<10)}}
		for range 3 {
			<-time.After(time.Millisecond)
			if _, err := l.Produce(bg, big); err != nil {
				t.Fatal(err)
			}
		}
		closeLog(t, l)
		d.SetHook(nil)
		if truncates == 0 {
			t.Fatal("nothing gave back what the failed reservation may have kept")
		}
	})
}
