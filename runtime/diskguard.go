package runtime

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// ErrLowDisk: a produce's commit would take the data directory's file
// system under the node's floor of free space (or inodes), so it is
// refused before anything is written. It wraps partition.ErrNoSpace: to a
// caller it is a full disk, with nothing of the batch kept.
var ErrLowDisk = errors.New("runtime: free space under the floor")

// diskGuardEvery is how old a reading of the free space may be when a
// produce is checked against the floor: the guard costs a statfs at most
// this often, and lifts this soon after retention frees space.
const diskGuardEvery = 100 * time.Millisecond

// diskGuard keeps the node's floor of free bytes and inodes on the data
// directory's file system (Config.MinFreeBytes, MinFreeInodes) under every
// open log (partition.SpaceGuard, given to each as Options.Space), so a
// commit never meets ENOSPC half-way: the floor is the room the node keeps
// for what it must still write (hwm files, consumer progress, metadata).
// A log asks it for what a batch's commit adds to the file system (its
// frame, a roll's files: partition/space.go), and for the space it
// prepares past its frames; the guard takes it when the free space stays
// at or above the floor after it.
//
// Invariant: mu guards last, at, err and pending; last is a reading at
// most diskGuardEvery old when a write is checked, less pending when it
// was taken, less what the guard let through since. pending is what the
// guard let through and the logs have not released yet (their writes not
// done, so a fresh reading may not count them). mu is a leaf.
type diskGuard struct {
	files           vfs.FS
	dir             string
	minBytes, minIn uint64
	logger          *zap.Logger

	mu      sync.Mutex
	last    vfs.Space
	at      time.Time
	err     error                // the last reading's, if it failed
	pending partition.Allocation // taken, not yet released
}

// space is the guard as the logs' Options.Space: none without a floor.
func (g *diskGuard) space() partition.SpaceGuard {
	if g.minBytes == 0 && g.minIn == 0 {
		return nil
	}
	return g
}

// Admit takes a when the free space less a stays at or above the floor,
// taking it off the reading at once, so writes at once, or many within
// one reading, never spend the floor between two readings, and off every
// fresh reading until it is released, so neither does a write still on
// its way when one is taken; otherwise it refuses with ErrLowDisk. A
// reading that fails (logged once) lets the write through: the commit
// itself then meets the disk's own answer.
func (g *diskGuard) Admit(a partition.Allocation) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.readLocked()
	if g.err != nil {
		g.hold(a)
		return nil
	}
	bytes, bytesOK := less(g.last.Bytes, a.Bytes, g.minBytes)
	inodes, inodesOK := less(g.last.Inodes, a.Files, g.minIn)
	if !bytesOK || !inodesOK {
		return fmt.Errorf("%w: %w: the commit takes %d bytes and %d files, %d bytes and %d inodes are free, the floor is %d bytes and %d inodes",
			ErrLowDisk, partition.ErrNoSpace, a.Bytes, a.Files, g.last.Bytes, g.last.Inodes, g.minBytes, g.minIn)
	}
	g.last.Bytes, g.last.Inodes = bytes, inodes
	g.hold(a)
	return nil
}

// Release gives back a, which Admit took: its writes are done (or given
// up), so the readings from now on count them as the file system does.
func (g *diskGuard) Release(a partition.Allocation) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold(partition.Allocation{Bytes: -a.Bytes, Files: -a.Files})
}

func (g *diskGuard) hold(a partition.Allocation) {
	g.pending.Bytes += a.Bytes
	g.pending.Files += a.Files
}

// less is free less take (given back when take is under 0), and whether
// that stays at or above floor.
func less(free uint64, take int64, floor uint64) (uint64, bool) {
	if take < 0 {
		free += uint64(-take)
	} else if free < uint64(take) {
		return 0, false
	} else {
		free -= uint64(take)
	}
	return free, free >= floor
}

// read is the free space, read again when the last reading is stale, less
// what was let through and is not yet released.
func (g *diskGuard) read() (vfs.Space, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.readLocked()
	return g.last, g.err
}

func (g *diskGuard) readLocked() {
	if now := time.Now(); g.at.IsZero() || now.Sub(g.at) >= diskGuardEvery {
		free, err := g.files.Free(g.dir)
		if err != nil && g.err == nil && g.logger != nil {
			g.logger.Warn("free space unreadable: produce goes on without the floor until it reads again", zap.Error(err))
		}
		free.Bytes, _ = less(free.Bytes, g.pending.Bytes, 0)
		free.Inodes, _ = less(free.Inodes, g.pending.Files, 0)
		g.last, g.err, g.at = free, err, now
	}
}

// diskCollector exports each node's free space and floor, by data
// directory: narad_disk_free_bytes, narad_disk_free_inodes,
// narad_disk_floor_bytes, narad_disk_floor_inodes. Nodes on one registerer
// share it.
type diskCollector struct{ nodeSet }

var (
	diskFreeBytesDesc  = prometheus.NewDesc("narad_disk_free_bytes", "Bytes free to the node on its data directory's file system.", []string{"data_dir"}, nil)
	diskFreeInodesDesc = prometheus.NewDesc("narad_disk_free_inodes", "Inodes free on the data directory's file system.", []string{"data_dir"}, nil)
	diskFloorBytesDesc = prometheus.NewDesc("narad_disk_floor_bytes", "Free bytes under which produce is refused (507 no_space).", []string{"data_dir"}, nil)
	diskFloorInDesc    = prometheus.NewDesc("narad_disk_floor_inodes", "Free inodes under which produce is refused (507 no_space).", []string{"data_dir"}, nil)
)

// registerDisk adds n to reg's disk collector and returns what removes it.
func registerDisk(reg prometheus.Registerer, n *Node) (remove func()) {
	return promshare.Register(reg, &diskCollector{}).join(n)
}

func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{diskFreeBytesDesc, diskFreeInodesDesc, diskFloorBytesDesc, diskFloorInDesc} {
		ch <- d
	}
}

func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{}
	for _, n := range c.sorted() {
		g := n.disk
		if seen[g.dir] {
			continue
		}
		seen[g.dir] = true
		gauge := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), g.dir)
		}
		gauge(diskFloorBytesDesc, g.minBytes)
		gauge(diskFloorInDesc, g.minIn)
		if free, err := g.read(); err == nil {
			gauge(diskFreeBytesDesc, free.Bytes)
			gauge(diskFreeInodesDesc, free.Inodes)
		}
	}
}
