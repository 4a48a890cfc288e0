package runtime

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// TestDiskGuard_ProduceRefusedUnderTheFloorAndTakenAgain: on a disk whose
// free space falls under the node's floor, a produce is refused with
// ErrLowDisk (a partition.ErrNoSpace: 507 no_space) before anything is
// written, never half-written by ENOSPC; the boundary stays where the
// last commit left it; once space is freed, produce is taken again. The
// free space and the floor are exported.
func TestDiskGuard_ProduceRefusedUnderTheFloorAndTakenAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 5)
		d.SetCapacity(vfs.Space{Bytes: 64 << 10})
		reg := prometheus.NewRegistry()
		ms, err := OpenLocalMetastore(d, dataDir)
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(Config{DataDir: dataDir, FS: d, Metastore: ms, Registerer: reg, MinFreeBytes: 16 << 10, SegmentMaxBytes: 4 << 10})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		if err := n.Start(bg); err != nil {
			t.Fatal(err)
		}
		n.CreateTopic(bg, "fill", 1, Retention{})
		value := make([]byte, 1000)
		var hwm int64
		refused := false
		for range 100 {
			advanceBy(diskGuardEvery) // a fresh reading each time
			_, err := n.Produce(bg, "fill", 0, []partition.Record{{Value: value}})
			if err != nil {
				if !errors.Is(err, ErrLowDisk) || !errors.Is(err, partition.ErrNoSpace) {
					t.Fatalf("produce near the floor: %v, want ErrLowDisk (a partition.ErrNoSpace)", err)
				}
				refused = true
				break
			}
			hwm++
		}
		if !refused {
			t.Fatal("the disk never reached the floor")
		}
		l, err := n.Log(bg, "fill", 0)
		if err != nil || l.HighWatermark() != hwm {
			t.Fatalf("high watermark %d after the refusal, want %d (the acked records), %v", l.HighWatermark(), hwm, err)
		}
		if got := series(t, reg, "narad_disk_floor_bytes"); got != "data_dir=/data 16384\n" {
			t.Fatalf("floor gauge %q", got)
		}
		if got := series(t, reg, "narad_disk_free_bytes"); !strings.HasPrefix(got, "data_dir=/data ") {
			t.Fatalf("free gauge %q", got)
		}

		d.SetCapacity(vfs.Space{Bytes: 1 << 20}) // space freed (as retention would)
		advanceBy(diskGuardEvery)
		if base, err := n.Produce(bg, "fill", 0, []partition.Record{{Value: value}}); err != nil || base != hwm {
			t.Fatalf("produce after space was freed: %d, %v; want %d", base, err, hwm)
		}
	})
}

// TestDiskGuard_ABurstWithinOneReadingKeepsTheFloor: produces that come
// within one reading of the free space each take their batch off it, so
// a burst stops at the floor instead of running the disk to ENOSPC (found
// by review).
func TestDiskGuard_ABurstWithinOneReadingKeepsTheFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newTestDisk(t, 5)
		d.SetCapacity(vfs.Space{Bytes: 64 << 10})
		const floor = 16 << 10
		n, err := New(Config{DataDir: dataDir, FS: d, MinFreeBytes: floor, SegmentMaxBytes: 4 << 10})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		if err := n.Start(bg); err != nil {
			t.Fatal(err)
		}
		n.CreateTopic(bg, "fill", 1, Retention{})
		advanceBy(diskGuardEvery) // one fresh reading, then a burst inside it
		var last error
		for range 100 {
			if _, last = n.Produce(bg, "fill", 0, []partition.Record{{Value: make([]byte, 1000)}}); last != nil {
				break
			}
		}
		if !errors.Is(last, ErrLowDisk) {
			t.Fatalf("the burst ended with %v, want ErrLowDisk", last)
		}
		if free, _ := d.Free(dataDir); free.Bytes < floor/2 {
			t.Fatalf("%d bytes free after the burst: the floor of %d was spent", free.Bytes, floor)
		}
	})
}

// TestOSFree_ReportsTheTestDisk: the real file system's free space is
// read with statfs, some bytes and inodes (or inodes without end).
func TestOSFree_ReportsTheTestDisk(t *testing.T) {
	free, err := vfs.OS{}.Free(t.TempDir())
	if err != nil || free.Bytes == 0 || free.Inodes == 0 {
		t.Fatalf("free %+v, %v", free, err)
	}
}

// startFloorNode starts a node with a floor of floor free bytes, 1 MiB
// segments (16 KiB steps of zeros ahead) and the topic "fill" open, on a
// disk made in the caller's bubble.
func startFloorNode(t *testing.T, floor uint64) (*testNode, *sim.Disk) {
	t.Helper()
	d := newTestDisk(t, 5)
	n := startNode(t, d, Config{MinFreeBytes: floor, SegmentMaxBytes: 1 << 20})
	if _, _, err := n.CreateTopic(bg, "fill", 1, Retention{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Log(bg, "fill", 0); err != nil {
		t.Fatal(err)
	}
	return n, d
}

// leaveFree sizes d so that it has floor+headroom bytes free now, and
// lets the guard's reading go stale so the next produce reads them.
func leaveFree(t *testing.T, d *sim.Disk, floor, headroom uint64) {
	t.Helper()
	const capacity = 1 << 30
	d.SetCapacity(vfs.Space{Bytes: capacity})
	free, err := d.Free(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	d.SetCapacity(vfs.Space{Bytes: capacity - free.Bytes + floor + headroom})
	advanceBy(diskGuardEvery)
}

func freeBytes(t *testing.T, d *sim.Disk) uint64 {
	t.Helper()
	free, err := d.Free(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return free.Bytes
}

// TestDiskGuard_ABurstWhoseCommitsFitIsTakenWhole: produces within one
// reading of the free space are each counted at what their commit takes
// (the frame, and the zeros written ahead when they are: partition/space.go),
// so a burst that fits above the floor is taken whole, and the floor
// holds. Found by review: each batch was counted at twice its record
// bytes, and a burst was refused with megabytes above the floor.
func TestDiskGuard_ABurstWhoseCommitsFitIsTakenWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const floor, headroom = 64 << 10, 64 << 10
		n, d := startFloorNode(t, floor)
		leaveFree(t, d, floor, headroom)
		// 40 frames of about 1 KiB, and a step of zeros (16 KiB) past
		// them: about 58 KiB. Counted at twice the record bytes, 80 KB.
		for i := range 40 {
			if _, err := n.Produce(bg, "fill", 0, []partition.Record{{Value: make([]byte, 1000)}}); err != nil {
				t.Fatalf("batch %d of a burst whose commits fit above the floor: %v", i, err)
			}
		}
		if free := freeBytes(t, d); free < floor {
			t.Fatalf("%d bytes free after the burst, under the floor of %d", free, floor)
		}
	})
}

// TestDiskGuard_ABatchWhoseFrameWouldTakeTheFloorIsRefused: a batch is
// counted at its frame, not its record bytes: a thousand one-byte records
// make a frame of about 15 KB, refused with 4 KiB above the floor, nothing
// written; a batch whose frame fits is taken.
func TestDiskGuard_ABatchWhoseFrameWouldTakeTheFloorIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const floor, headroom = 64 << 10, 4 << 10
		n, d := startFloorNode(t, floor)
		leaveFree(t, d, floor, headroom)
		small := make([]partition.Record, 1000)
		for i := range small {
			small[i] = partition.Record{Value: []byte{byte(i)}}
		}
		before := freeBytes(t, d)
		if _, err := n.Produce(bg, "fill", 0, small); !errors.Is(err, ErrLowDisk) || !errors.Is(err, partition.ErrNoSpace) {
			t.Fatalf("a batch whose frame takes the free space under the floor: %v, want ErrLowDisk", err)
		}
		l, err := n.Log(bg, "fill", 0)
		if err != nil {
			t.Fatal(err)
		}
		if after := freeBytes(t, d); after != before || l.HighWatermark() != 0 {
			t.Fatalf("after the refusal: %d bytes free (%d before), high watermark %d; want nothing written", after, before, l.HighWatermark())
		}
		if base, err := n.Produce(bg, "fill", 0, small[:100]); err != nil || base != 0 {
			t.Fatalf("a batch whose frame fits: base %d, %v", base, err)
		}
		if free := freeBytes(t, d); free < floor {
			t.Fatalf("%d bytes free, under the floor of %d", free, floor)
		}
	})
}

// TestDiskGuard_ZerosAheadNeverTakeTheFloor: a busy partition writes no
// zeros past its frames that would take the free space under the floor
// (partition/prealloc.go); the batches themselves, which fit, are taken.
func TestDiskGuard_ZerosAheadNeverTakeTheFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const floor, headroom = 64 << 10, 2 << 10
		n, d := startFloorNode(t, floor)
		leaveFree(t, d, floor, headroom)
		for i := range 2 { // the second is busy: a step of zeros (16 KiB) would follow it
			if _, err := n.Produce(bg, "fill", 0, []partition.Record{{Value: make([]byte, 100)}}); err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
		}
		if free := freeBytes(t, d); free < floor {
			t.Fatalf("%d bytes free after two small batches, under the floor of %d", free, floor)
		}
	})
}

// TestDiskGuard_ACommitUnderWayAtAFreshReadingIsStillCounted: a batch the
// guard took is counted until its frame is in the file, not only until
// the next reading of the free space: a reading taken while one
// partition's commit is still on its way to the disk does not yet hold
// its frame, and another partition's batch that fits only in the space
// the first one took is refused; the floor holds.
func TestDiskGuard_ACommitUnderWayAtAFreshReadingIsStillCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const floor, headroom = 64 << 10, 24 << 10
		d := newTestDisk(t, 5)
		n := startNode(t, d, Config{MinFreeBytes: floor, SegmentMaxBytes: 1 << 20})
		if _, _, err := n.CreateTopic(bg, "fill", 2, Retention{}); err != nil {
			t.Fatal(err)
		}
		for p := range 2 {
			if _, err := n.Log(bg, "fill", p); err != nil {
				t.Fatal(err)
			}
		}
		leaveFree(t, d, floor, headroom)
		batch := []partition.Record{{Value: make([]byte, 16<<10)}} // two of them do not fit above the floor
		segment0 := partitionPath("fill", 0) + "/"
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		d.SetHook(func(c sim.Call) error {
			if c.Op == sim.OpWrite && strings.HasPrefix(c.Path, segment0) && strings.HasSuffix(c.Path, wire.SegmentFileSuffix) {
				once.Do(func() {
					close(entered)
					<-release // partition 0's frame, taken by the guard, not yet written
				})
			}
			return nil
		})
		first := make(chan error, 1)
		go func() {
			_, err := n.Produce(bg, "fill", 0, batch)
			first <- err
		}()
		<-entered
		advanceBy(diskGuardEvery) // the next batch reads the free space again
		_, second := n.Produce(bg, "fill", 1, batch)
		close(release)
		if err := <-first; err != nil {
			t.Fatalf("the first batch, which fits: %v", err)
		}
		d.SetHook(nil)
		if !errors.Is(second, ErrLowDisk) {
			t.Fatalf("a second batch that fits only in the space the first took: %v, want ErrLowDisk", second)
		}
		if free := freeBytes(t, d); free < floor {
			t.Fatalf("%d bytes free, under the floor of %d", free, floor)
		}
	})
}
