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

// ErrLowDisk: the data directory's file system has less free space (or
// fewer free inodes) than the node's floor, so a produce is refused before
// anything is written. It wraps partition.ErrNoSpace: to a caller it is a
// full disk, with nothing of the batch kept.
var ErrLowDisk = errors.New("runtime: free space under the floor")

// diskGuardEvery is how old a reading of the free space may be when a
// produce is checked against the floor: the guard costs a statfs at most
// this often, and lifts this soon after retention frees space.
const diskGuardEvery = 100 * time.Millisecond

// diskGuard refuses produce while the data directory's file system is
// under the node's floor of free bytes or inodes (Config.MinFreeBytes,
// MinFreeInodes), so a commit never meets ENOSPC half-way: the floor is
// the room the node keeps for what it must still write (hwm files,
// consumer progress, metadata).
//
// Invariant: mu guards last and at; a reading is at most diskGuardEvery
// old when a produce is checked. mu is a leaf.
type diskGuard struct {
	files           vfs.FS
	dir             string
	minBytes, minIn uint64
	logger          *zap.Logger

	mu   sync.Mutex
	last vfs.Space
	at   time.Time
	err  error // the last reading's, if it failed
}

// check refuses a batch of about bytes when it would take the file
// system under the floor. A reading that fails (logged once) lets the
// produce through: the commit itself then meets the disk's own answer.
func (g *diskGuard) check(bytes int) error {
	if g.minBytes == 0 && g.minIn == 0 {
		return nil
	}
	free, err := g.read(bytes)
	if err != nil {
		return nil
	}
	if free.Bytes < g.minBytes+uint64(bytes) || free.Inodes < g.minIn {
		return fmt.Errorf("%w: %w: %d bytes and %d inodes free, the floor is %d bytes and %d inodes",
			ErrLowDisk, partition.ErrNoSpace, free.Bytes, free.Inodes, g.minBytes, g.minIn)
	}
	return nil
}

// read is the free space, read again when the last reading is stale. A
// batch let through is taken off the reading at once (twice its record
// bytes, for framing and indexes), so produces at once, or many within one
// reading, never spend the floor between two readings.
func (g *diskGuard) read(admit ...int) (vfs.Space, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := time.Now(); g.at.IsZero() || now.Sub(g.at) >= diskGuardEvery {
		free, err := g.files.Free(g.dir)
		if err != nil && g.err == nil && g.logger != nil {
			g.logger.Warn("free space unreadable: produce goes on without the floor until it reads again", zap.Error(err))
		}
		g.last, g.err, g.at = free, err, now
	}
	free := g.last
	for _, bytes := range admit {
		need := g.minBytes + uint64(bytes)
		if g.err == nil && free.Bytes >= need && free.Inodes >= g.minIn {
			g.last.Bytes -= min(g.last.Bytes, 2*uint64(bytes))
		}
	}
	return free, g.err
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
