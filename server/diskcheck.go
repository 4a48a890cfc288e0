package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/narad-io/storage/diskcheck"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// CheckDisk probes the file system of cfg's data directory, which must
// exist (package diskcheck), within budget (0: diskcheck.DefaultBudget),
// against what a node of cfg serves with: its floors of free space, and
// the open-file limit against its open-log budget as New computes it.
// It writes only its probe files there, locked while it runs, so it may
// run beside a node serving the directory. A file system in memory only
// (tmpfs, ramfs) is an error here, the verdict of narad-storaged
// diskcheck, which runs it; Start runs the same probe with
// Config.DiskCheckBudget, and only warns of one.
func CheckDisk(ctx context.Context, cfg Config, budget time.Duration) (diskcheck.Report, error) {
	opts := probeOptions(cfg, budget)
	opts.MemoryFSIsError = true
	return diskcheck.Probe(ctx, opts)
}

// probeOptions are the disk check of cfg's data directory, within budget,
// against cfg's floors and open-log budget.
func probeOptions(cfg Config, budget time.Duration) diskcheck.Options {
	cfg = cfg.withDescriptorDefaults()
	return diskcheck.Options{
		Dir:           cfg.DataDir,
		Budget:        budget,
		MinFreeBytes:  cfg.MinFreeBytes,
		MinFreeInodes: cfg.MinFreeInodes,
		Descriptors:   descriptorsOf(cfg),
	}
}

// descriptorsOf is the process's open-file limit against the budget of
// cfg (its defaults filled in).
func descriptorsOf(cfg Config) *diskcheck.Descriptors {
	d := &diskcheck.Descriptors{Limit: diskcheck.Unlimited, OpenLogs: cfg.MaxOpenLogs}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur != unix.RLIM_INFINITY && lim.Cur < math.MaxInt64 {
		d.Limit = lim.Cur
	}
	if cfg.MaxOpenLogs > 0 {
		d.Needed = uint64(runtime.DescriptorsFor(cfg.MaxOpenLogs, max(cfg.MaxConnections, 0)))
	}
	return d
}

// diskCheckMargin is how long past its budget Start waits for its disk
// check: the probe begins no round once its budget is spent, but the
// round under way and its cleanup still run, and a flush cannot be
// interrupted.
const diskCheckMargin = time.Second

// startupCheck is the disk check a Start runs.
//
// Invariants: done is set by the Start that began the probe, before that
// Start returns, and closed when the probe's goroutine has ended (its
// report logged and in the gauges); so Close, once the Start under way
// returned, reads it without a lock.
type startupCheck struct {
	metrics *diskcheck.Metrics
	fs      vfs.FS        // what the probe goes through; nil: vfs.OS (tests set another)
	margin  time.Duration // diskCheckMargin (tests set another)
	// timer gives the channel on which Start stops waiting after d, and
	// its stop (nil: a time.Timer; tests give their own).
	timer func(d time.Duration) (<-chan time.Time, func() bool)
	done  chan struct{} // nil until a Start began a probe
}

// checkDisk runs the startup disk check in its own goroutine and waits
// for it at most its budget and the margin, or until ctx ends or the own
// listener fails. The goroutine logs the report and puts it in the
// gauges whenever the probe returns; it keeps its probe file locked till
// then. A probe still running when Start stops waiting is logged as
// stalled, with the call it is in, and the start goes on: a hung flush
// never holds the node up for longer than the bound.
func (s *Server) checkDisk(ctx context.Context) error {
	c := &s.disk
	budget := time.Duration(s.cfg.DiskCheckBudget)
	watch := &diskcheck.Watch{}
	opts := probeOptions(s.cfg, budget)
	opts.FS, opts.Watch = c.fs, watch
	probeCtx, stopProbe := context.WithCancel(ctx)
	done := make(chan struct{})
	c.done = done
	go func() {
		defer close(done)
		defer stopProbe()
		r, err := diskcheck.Probe(probeCtx, opts)
		s.reportDiskCheck(r, err)
	}()
	timer := c.timer
	if timer == nil {
		timer = func(d time.Duration) (<-chan time.Time, func() bool) {
			t := time.NewTimer(d)
			return t.C, t.Stop
		}
	}
	bound := budget + c.margin
	expired, stopTimer := timer(bound)
	defer stopTimer()
	select {
	case <-done:
		return ctx.Err()
	case <-ctx.Done():
		stopProbe() // no round begins after the one under way
		return ctx.Err()
	case err := <-s.failed:
		stopProbe()
		return err
	case <-expired:
		stopProbe()
		s.diskCheckStalled(watch, bound)
		return nil
	}
}

// reportDiskCheck logs a probe's report and puts it in the gauges; a
// probe that could not run is a warning (the node's own opens say the
// rest), and one ended before it began says nothing.
func (s *Server) reportDiskCheck(r diskcheck.Report, err error) {
	if r.Findings == nil {
		if err != nil && !errors.Is(err, context.Canceled) {
			s.logger.Warn("disk check could not run", zap.Error(err))
		}
		return
	}
	diskcheck.Log(s.logger, r)
	s.disk.metrics.Set(r)
}

// diskCheckStalled says that Start stopped waiting for the disk check
// after bound, naming the call the probe is in.
func (s *Server) diskCheckStalled(watch *diskcheck.Watch, bound time.Duration) {
	finding := fmt.Sprintf("the probe is not done after %s", bound)
	fields := []zap.Field{zap.String("data_dir", s.cfg.DataDir), zap.Duration("bound", bound)}
	if call, path, since, ok := watch.Current(); ok {
		took := time.Since(since)
		finding = fmt.Sprintf("a %s took over %s (of %s, and still running)", call, took.Round(time.Millisecond), path)
		fields = append(fields, zap.String("call", call), zap.String("path", path), zap.Duration("running", took))
	}
	s.logger.Warn("disk check: stalled", append(fields,
		zap.String("finding", finding+"; the start goes on without the check, whose findings are logged when the call returns"),
		zap.String("fix", "check the kernel log (dmesg) for the device's errors, and its latency (iostat -x): a flush that slow stalls every commit too"))...)
	s.disk.metrics.SetStalled()
}

// waitDiskCheck waits, until stop ends, for the startup disk check's
// goroutine (its probe files removed, its report logged).
func (s *Server) waitDiskCheck(stop context.Context) {
	done := s.disk.done
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-stop.Done():
		s.logger.Warn("disk check: still stalled at close; its probe files are left for the next start's check to remove", zap.String("data_dir", s.cfg.DataDir))
	}
}
