// Package coldwalk is the retention walk over closed partitions
// (docs/design.md, "Retention"). The reaper sweeps only open logs, so a
// partition closed by idle eviction, or not reopened since a restart, would
// keep its expired segments until something touched it. Every Interval the
// walk lists the partition directories on disk (topics/<name>/pNNNNN),
// stats the segments of each one this node owns whose log is closed,
// without opening them, and asks the node to sweep one holding an expired
// segment once: open under the topic's guard, one Sweep through the same
// roll, detach and unlink path, close.
//
// This package owns the listing, the expiry decision from file times (a
// segment's mtime is its last write, as recovery takes it), the pass's
// containment of a panic in one partition's open, sweep or close (logged at
// error with the partition and the stack, counted in
// narad_cold_retention_panics_total, the partition left alone for
// PanicBackoff), and narad_cold_retention_swept_total. The node owns the
// rest through the Node interface: the assignment, the topic guard, the
// directory's existence checked under it, the open path with its
// incarnation check, and the close. The walk runs only while the node's
// metadata replica is caught up, since it opens logs under the retention
// that replica holds. Its loop is supervisor.StartLoop's, named
// "cold_retention".
package coldwalk

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Defaults (docs/design.md, "Retention": storage.cold_retention_walk_ms
// defaults to 5 minutes; a panicking partition is left alone for 30).
const (
	DefaultInterval     = 5 * time.Minute
	DefaultStallAfter   = 5 * time.Minute
	DefaultPanicBackoff = 30 * time.Minute
	DefaultMaxRestarts  = 10
)

// Errors SweepCold answers for a partition it left alone; the walk skips it
// quietly.
var (
	// ErrPartitionGone: the partition's directory no longer exists (a
	// reclaim, a quarantine or a move removed it after the listing). It is
	// never recreated by an open.
	ErrPartitionGone = errors.New("coldwalk: partition directory gone")
	// ErrPartitionOpen: the partition's log is open now: the reaper's.
	ErrPartitionOpen = errors.New("coldwalk: partition log open")
)

// Node is what the walk needs from the node that owns the partitions;
// runtime satisfies it.
type Node interface {
	// CaughtUp reports whether the node's metadata replica is caught up
	// with the leader.
	CaughtUp() bool
	// Retention is the topic's retention bounds as the replica holds them
	// (0: no bound); ok is false when it holds no such topic.
	Retention(ctx context.Context, topic string) (maxAge time.Duration, maxBytes int64, ok bool, err error)
	// Assigned reports whether the local assignment gives this node the
	// partition.
	Assigned(ctx context.Context, topic string, p int) (bool, error)
	// IsOpen reports whether the partition's log is open now.
	IsOpen(topic string, p int) bool
	// SweepCold sweeps a closed partition once: under the topic's guard it
	// checks that the directory still exists (ErrPartitionGone) and the log
	// is still closed (ErrPartitionOpen), opens the log through the node's
	// open path, runs one Sweep and closes the log, even when the sweep
	// panics; the log is never installed among the open ones.
	SweepCold(ctx context.Context, topic string, p int) (partition.SweepResult, error)
}

// Config configures the walk. Zero values take the defaults.
type Config struct {
	// FS is the file system the walk lists and stats through; default
	// vfs.OS, the real one.
	FS vfs.FS
	// TopicsDir is the data directory's topics/. Required.
	TopicsDir string
	// Node sweeps what the walk finds. Required.
	Node Node
	// Interval is the time from the end of one walk to the start of the
	// next; default DefaultInterval. (A node that does not want the walk
	// does not start it.)
	Interval time.Duration
	// StallAfter replaces a walk that has not moved to a new partition for
	// this long; default DefaultStallAfter.
	StallAfter time.Duration
	// PanicBackoff is how long a partition whose open, sweep or close
	// panicked is left alone; default DefaultPanicBackoff.
	PanicBackoff time.Duration
	// MaxRestarts: loop replacements past it log at error; default
	// DefaultMaxRestarts.
	MaxRestarts int
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the walk's and its loop's metrics; nil registers
	// nothing (never the global registry).
	Registerer prometheus.Registerer
}

// Start starts the walk's loop; the first walk runs one Interval after
// the start. Close the returned loop to stop it. It panics on a Config
// without TopicsDir or Node.
func Start(cfg Config) *supervisor.Loop {
	if cfg.TopicsDir == "" || cfg.Node == nil {
		panic("coldwalk: Config needs TopicsDir and Node")
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
	if cfg.PanicBackoff <= 0 {
		cfg.PanicBackoff = DefaultPanicBackoff
	}
	if cfg.MaxRestarts <= 0 {
		cfg.MaxRestarts = DefaultMaxRestarts
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	w := &walker{
		cfg:    cfg,
		logger: cfg.Logger.With(zap.String("loop", "cold_retention")),
		swept: promshare.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_cold_retention_swept_total", Help: "Closed partitions the cold retention walk opened, swept and closed.",
		})),
		leftAlone: map[partitionKey]time.Time{},
	}
	return supervisor.StartLoop(supervisor.LoopConfig{
		Name:        "cold_retention",
		Interval:    cfg.Interval,
		StallAfter:  cfg.StallAfter,
		MaxRestarts: cfg.MaxRestarts,
		Logger:      cfg.Logger,
		Registerer:  cfg.Registerer,
	}, w.pass)
}

type partitionKey struct {
	topic     string
	partition int
}

// walker is the walk's state.
//
// Invariants:
//   - cfg, logger and swept never change after Start.
//   - mu guards leftAlone: a replaced worker may still be finishing its
//     pass while the new one runs.
//   - leftAlone holds a partition only until its time has passed; the
//     next visit after that drops it.
type walker struct {
	cfg    Config
	logger *zap.Logger
	swept  prometheus.Counter

	mu        sync.Mutex
	leftAlone map[partitionKey]time.Time // partition -> when the walk may visit it again
}

// pass is one walk over topics/.
func (w *walker) pass(ctx context.Context, pc *supervisor.PassContext) {
	if !w.cfg.Node.CaughtUp() {
		w.logger.Debug("cold retention walk skipped: the metadata replica is not caught up")
		return
	}
	topics, err := w.cfg.FS.ReadDir(w.cfg.TopicsDir)
	if err != nil {
		w.logger.Warn("cold retention walk: list topics", zap.Error(err))
		return
	}
	for _, te := range topics {
		// ValidateTopicName refuses quarantined <name>.stale-<id>
		// directories and anything else no topic can be named.
		if !te.IsDir || wire.ValidateTopicName(te.Name) != nil {
			continue
		}
		maxAge, maxBytes, ok, err := w.cfg.Node.Retention(ctx, te.Name)
		if err != nil {
			w.logger.Warn("cold retention walk: topic record", zap.String("topic", te.Name), zap.Error(err))
			continue
		}
		if !ok || (maxAge <= 0 && maxBytes <= 0) {
			continue // no record (the purge's), or no bound
		}
		bounds := bounds{maxAge: maxAge, maxBytes: maxBytes}
		parts, err := w.cfg.FS.ReadDir(filepath.Join(w.cfg.TopicsDir, te.Name))
		if err != nil {
			w.logger.Warn("cold retention walk: list partitions", zap.String("topic", te.Name), zap.Error(err))
			continue
		}
		for _, pe := range parts {
			if ctx.Err() != nil {
				return
			}
			p, err := wire.ParsePartitionDirName(pe.Name)
			if err != nil || !pe.IsDir {
				continue // the incarnation marker, a move's staging directory
			}
			pc.Beat()
			w.visit(ctx, pc, partitionKey{te.Name, p}, bounds)
		}
	}
}

// visit sweeps one partition if it is this node's, closed, and holds an
// expired segment.
func (w *walker) visit(ctx context.Context, pc *supervisor.PassContext, key partitionKey, b bounds) {
	if w.leftAloneNow(key) || w.cfg.Node.IsOpen(key.topic, key.partition) {
		return
	}
	if assigned, err := w.cfg.Node.Assigned(ctx, key.topic, key.partition); err != nil || !assigned {
		return // another node's copy (a move's source, say): its stale-copy sweep's
	}
	dirName, _ := wire.PartitionDirName(key.partition)
	dir := filepath.Join(w.cfg.TopicsDir, key.topic, dirName)
	expired, err := expiredOnDisk(w.cfg.FS, dir, b, time.Now())
	if err != nil {
		w.logger.Debug("cold retention walk: stat segments", zap.String("dir", dir), zap.Error(err))
		return
	}
	if !expired || !w.cfg.Node.CaughtUp() {
		return
	}
	done := false
	pc.Item(fmt.Sprintf("%s/%d", key.topic, key.partition), func() {
		res, err := w.cfg.Node.SweepCold(ctx, key.topic, key.partition)
		done = true
		w.report(key, res, err)
	})
	if !done { // it panicked: logged at error with its stack, and counted, by Item
		until := time.Now().Add(w.cfg.PanicBackoff)
		w.mu.Lock()
		w.leftAlone[key] = until
		w.mu.Unlock()
		w.logger.Warn("cold retention walk: partition left alone after a panic",
			zap.String("topic", key.topic), zap.Int("partition", key.partition), zap.Time("until", until))
	}
}

func (w *walker) report(key partitionKey, res partition.SweepResult, err error) {
	fields := []zap.Field{zap.String("topic", key.topic), zap.Int("partition", key.partition)}
	switch {
	case errors.Is(err, ErrPartitionGone), errors.Is(err, ErrPartitionOpen):
		w.logger.Debug("cold retention walk: partition skipped", append(fields, zap.Error(err))...)
		return
	case err != nil && res.FailedUnlinks == 0:
		w.logger.Warn("cold retention sweep failed", append(fields, zap.Error(err))...)
		return
	}
	// Failed unlinks were logged and counted by the log; the files are
	// still there, so the next walk finds the partition expired again.
	w.swept.Inc()
	w.logger.Debug("cold retention sweep", append(fields, zap.Bool("rotated", res.Rotated),
		zap.Int("segments", res.DeletedSegments), zap.Int64("bytes", res.DeletedBytes),
		zap.Int("failed_unlinks", res.FailedUnlinks))...)
}

// leftAloneNow reports whether key is still being left alone after a
// panic, forgetting it once its time has passed.
func (w *walker) leftAloneNow(key partitionKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	until, ok := w.leftAlone[key]
	if ok && !time.Now().Before(until) {
		delete(w.leftAlone, key)
		return false
	}
	return ok
}

// expiredOnDisk reports, from a partition directory's listing and file
// times only, whether a sweep would delete or rotate anything: the log's
// own rule (partition.Log.Expired) with each segment's mtime as its last
// write, as recovery takes it. Segments run oldest first, and a sweep
// deletes a prefix of them, so for the age bound two stats are enough: the
// oldest sealed segment, and the active (newest) one, rotated once its
// last write is older than the cutoff if it holds anything (a closed log
// is fully committed). A byte bound sums every segment's size: past it,
// with a sealed segment to delete, the sweep has work.
func expiredOnDisk(files vfs.FS, dir string, b bounds, now time.Time) (bool, error) {
	entries, err := files.ReadDir(dir)
	if err != nil {
		return false, err
	}
	var segments []string // sorted by name: 20-digit names sort by offset
	for _, e := range entries {
		if _, err := wire.ParseSegmentFileName(e.Name); err == nil && !e.IsDir {
			segments = append(segments, e.Name)
		}
	}
	if len(segments) == 0 {
		return false, nil
	}
	if b.maxBytes > 0 && len(segments) > 1 {
		var held int64
		for _, name := range segments {
			fi, err := files.Stat(filepath.Join(dir, name))
			if err != nil {
				return false, err
			}
			held += fi.Size
		}
		if held > b.maxBytes {
			return true, nil
		}
	}
	if b.maxAge <= 0 {
		return false, nil
	}
	cutoff := now.Add(-b.maxAge)
	if len(segments) > 1 {
		fi, err := files.Stat(filepath.Join(dir, segments[0]))
		if err != nil {
			return false, err
		}
		if fi.ModTime.Before(cutoff) {
			return true, nil
		}
	}
	fi, err := files.Stat(filepath.Join(dir, segments[len(segments)-1]))
	if err != nil {
		return false, err
	}
	return fi.Size > 0 && fi.ModTime.Before(cutoff), nil
}

// bounds are a topic's retention bounds; 0 is none.
type bounds struct {
	maxAge   time.Duration
	maxBytes int64
}
