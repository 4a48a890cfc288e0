package scrub

import (
	"context"
	"errors"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Defaults (docs/design.md, "Scrubber").
const (
	// DefaultRate is the daemon's scrub rate, 4 MiB/s: a few percent of
	// one disk's sequential read, and a node's terabyte of sealed segments
	// checked about every three days.
	DefaultRate = 4 << 20
	// MinRate is the least rate the daemon takes: slower, a pass over a
	// node's segments would take years. Any positive rate is safe from
	// the watchdog: a wait beats at least every beatEvery.
	MinRate = 4 << 10
	// DefaultInterval is the pause between the end of one pass and the
	// start of the next, and the least time between two whole passes over
	// a partition across restarts.
	DefaultInterval = time.Hour
	// DefaultStallAfter replaces a pass that has not read, waited a
	// second or moved to a new partition for this long. A paced wait
	// ticks at least every beatEvery (a second), at any rate.
	DefaultStallAfter = 5 * time.Minute
	// DefaultMaxRestarts: loop replacements past it log at error.
	DefaultMaxRestarts = 10
)

// ErrPartitionGone is what Node.InPartition answers when the partition's
// directory no longer exists (a reclaim, a quarantine, a purge or a move
// removed it): the scrubber leaves the partition and never recreates it.
var ErrPartitionGone = errors.New("scrub: partition directory gone")

// Node is what the scrubber needs from the node that owns the partitions;
// runtime satisfies it.
type Node interface {
	// Assigned reports whether the local assignment gives this node the
	// partition.
	Assigned(ctx context.Context, topic string, p int) (bool, error)
	// LogIfOpen returns the partition's log if it is open, without opening
	// it or counting as a use (idle eviction and the open-log budget see
	// nothing of the scrubber).
	LogIfOpen(topic string, p int) (*partition.Log, bool)
	// InPartition runs fn under the topic's guard when the partition's
	// directory still exists, else answers ErrPartitionGone: no progress
	// write lands in a directory a reclaim, quarantine or purge is
	// removing, nor in a recreated topic's.
	InPartition(topic string, p int, fn func() error) error
}

// Config configures the scrubber.
type Config struct {
	// FS is the file system; default vfs.OS, the real one.
	FS vfs.FS
	// TopicsDir is the data directory's topics/. Required.
	TopicsDir string
	// Node is the node whose partitions are scrubbed. Required.
	Node Node
	// Rate is the most bytes a second the scrubber reads. Required (> 0):
	// a node that does not want the scrubber does not start it.
	Rate int64
	// Interval is the pause between passes, and a partition whose last
	// whole pass ended less than it ago is left (a pass at a restart);
	// default DefaultInterval. Under a millisecond, every partition is
	// always due.
	Interval time.Duration
	// StallAfter: default DefaultStallAfter.
	StallAfter time.Duration
	// MaxRestarts: default DefaultMaxRestarts.
	MaxRestarts int
	// MetricsByTopic exports the per-partition gauges per topic.
	MetricsByTopic bool
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the scrubber's and its loop's metrics; nil
	// registers nothing.
	Registerer prometheus.Registerer
}

// Scrubber walks the node's sealed segments (the package doc says how).
//
// Invariants: cfg, pacer, logger and metrics never change after New;
// pacer is shared by every pass, a replaced worker's too, so two passes
// at once still read at most Rate together.
type Scrubber struct {
	cfg     Config
	pacer   *pacer
	logger  *zap.Logger
	metrics *metrics
	found   damageSeen
}

// New makes a scrubber; Start runs it in a supervised loop. It panics on a
// Config without TopicsDir, Node or a positive Rate.
func New(cfg Config) *Scrubber {
	if cfg.TopicsDir == "" || cfg.Node == nil || cfg.Rate <= 0 {
		panic("scrub: Config needs TopicsDir, Node and a positive Rate")
	}
	if cfg.FS == nil {
		cfg.FS = vfs.OS{}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.StallAfter <= 0 {
		cfg.StallAfter = DefaultStallAfter
	}
	if cfg.MaxRestarts <= 0 {
		cfg.MaxRestarts = DefaultMaxRestarts
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Scrubber{
		cfg:     cfg,
		pacer:   newPacer(cfg.Rate),
		logger:  cfg.Logger.With(zap.String("loop", "scrub")),
		metrics: newMetrics(cfg.Registerer, cfg.MetricsByTopic),
	}
}

// Start runs the scrubber's passes in a supervised loop named "scrub";
// the first pass runs at once, resuming each partition where its
// progress file stands and leaving those whose last whole pass ended
// less than an Interval ago, and each later one an Interval after the
// previous one ends. Close the returned loop to stop it.
func Start(cfg Config) *supervisor.Loop {
	s := New(cfg)
	loop := supervisor.StartLoop(supervisor.LoopConfig{
		Name:        "scrub",
		Interval:    s.cfg.Interval,
		StallAfter:  s.cfg.StallAfter,
		MaxRestarts: s.cfg.MaxRestarts,
		Logger:      s.cfg.Logger,
		Registerer:  s.cfg.Registerer,
	}, func(ctx context.Context, pc *supervisor.PassContext) {
		s.Pass(ctx, pc.Beat, pc.Item)
	})
	loop.Trigger()
	return loop
}
