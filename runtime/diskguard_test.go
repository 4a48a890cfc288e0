package runtime

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
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
