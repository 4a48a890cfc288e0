// Package reaper is the node's one retention loop over open partition logs
// (docs/design.md, "Retention"): a single supervised goroutine, not one
// per partition, that about once a minute sweeps every open log through
// partition.Log.Sweep, and at once when its loop is triggered (the runtime
// does so at a retention change). The sweep itself is the log's: it rotates an idle,
// fully committed active segment, detaches expired sealed segments under
// the log's actor and unlinks them after, and counts what it deleted
// (reason="age") and the unlinks that failed.
//
// This package owns the loop and what is the loop's alone: the order of a
// pass, panic containment per partition (a sweep that panics is logged with
// its partition and skipped; the others are swept), and two metrics,
// narad_reaper_sweeps_total and narad_reaper_sweep_duration_seconds. The
// loop runs under supervisor.StartLoop named "reaper", so a pass that stops
// ticking for StallAfter is replaced (narad_reaper_restarts) and restarts
// past MaxRestarts log at error: the alarm. It sees only open logs; closed
// ones are the cold walk's (coldwalk/).
package reaper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Defaults (docs/design.md, "Retention").
const (
	DefaultInterval    = time.Minute
	DefaultStallAfter  = time.Minute
	DefaultMaxRestarts = 10
)

// Target is one open log to sweep.
type Target struct {
	Topic     string
	Partition int
	Log       *partition.Log
}

// Config configures the reaper. Zero values take the defaults.
type Config struct {
	// Interval is the time from the end of one pass to the start of the
	// next; default DefaultInterval.
	Interval time.Duration
	// StallAfter replaces a pass that has not finished a partition for
	// this long; default DefaultStallAfter.
	StallAfter time.Duration
	// MaxRestarts: replacements past it log at error; default
	// DefaultMaxRestarts.
	MaxRestarts int
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the reaper's and its loop's metrics; nil
	// registers nothing (never the global registry).
	Registerer prometheus.Registerer
}

// Start starts the reaper's loop. Each pass sweeps the logs targets
// returns, one after another; targets is called once per pass and must
// not block on I/O (the runtime lists its registry). A log closed under
// the pass (idle eviction, the open-log budget, a retired incarnation) is
// skipped without a word. A log with neither an age nor a size bound,
// or nothing past them, answers its sweep at once, after retrying any
// unlink an earlier sweep left. Close the returned loop to stop it.
func Start(cfg Config, targets func() []Target) *supervisor.Loop {
	r, loopConfig := newReaper(cfg, targets)
	return supervisor.StartLoop(loopConfig, r.pass)
}

func newReaper(cfg Config, targets func() []Target) (*reaper, supervisor.LoopConfig) {
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
	r := &reaper{
		targets: targets,
		logger:  cfg.Logger.With(zap.String("loop", "reaper")),
		sweeps: promshare.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "narad_reaper_sweeps_total", Help: "Sweeps of an open partition log by the reaper.",
		})),
		sweepSeconds: promshare.Register(cfg.Registerer, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "narad_reaper_sweep_duration_seconds",
			Help:    "Duration of one open log's sweep: rotation, detach and unlinks.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 4, 12), // 50µs to about 3.5 minutes
		})),
	}
	return r, supervisor.LoopConfig{
		Name:        "reaper",
		Interval:    cfg.Interval,
		StallAfter:  cfg.StallAfter,
		MaxRestarts: cfg.MaxRestarts,
		Logger:      cfg.Logger,
		Registerer:  cfg.Registerer,
	}
}

// reaper is the state a pass reads; nothing in it changes after Start, so
// a replaced worker still running its pass shares it safely.
type reaper struct {
	targets      func() []Target
	logger       *zap.Logger
	sweeps       prometheus.Counter
	sweepSeconds prometheus.Histogram
}

// pass sweeps every target once. Each sweep is one supervised item: a
// panic in it is logged (at error, with the partition and the stack),
// counted in narad_reaper_panics_total, and the pass goes on.
func (r *reaper) pass(ctx context.Context, pc *supervisor.PassContext) {
	for _, t := range r.targets() {
		if ctx.Err() != nil {
			return
		}
		pc.Item(fmt.Sprintf("%s/%d", t.Topic, t.Partition), func() { r.sweep(ctx, t) })
	}
}

func (r *reaper) sweep(ctx context.Context, t Target) {
	started := time.Now()
	res, err := t.Log.Sweep(ctx)
	switch {
	case errors.Is(err, partition.ErrLogClosed):
		return // closed under us: nothing of it is ours any more
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return // this pass was stopped (Close, or a replaced worker)
	}
	r.sweeps.Inc()
	r.sweepSeconds.Observe(time.Since(started).Seconds())
	if err != nil && res.FailedUnlinks == 0 { // failed unlinks: the log logged and counted them
		r.logger.Warn("sweep failed", zap.String("topic", t.Topic), zap.Int("partition", t.Partition), zap.Error(err))
	}
	if res.Rotated || res.DeletedSegments > 0 {
		r.logger.Debug("swept", zap.String("topic", t.Topic), zap.Int("partition", t.Partition),
			zap.Bool("rotated", res.Rotated), zap.Int("segments", res.DeletedSegments),
			zap.Int64("bytes", res.DeletedBytes), zap.Int64("records", res.DeletedRecords))
	}
}
