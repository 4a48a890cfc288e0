package server

import (
	"context"
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
// run beside a node serving the directory. narad-storaged diskcheck runs
// it, and Start does with Config.DiskCheckBudget.
func CheckDisk(ctx context.Context, cfg Config, budget time.Duration) (diskcheck.Report, error) {
	return checkDisk(ctx, cfg, budget, vfs.OS{})
}

func checkDisk(ctx context.Context, cfg Config, budget time.Duration, files vfs.FS) (diskcheck.Report, error) {
	cfg = cfg.withDescriptorDefaults()
	return diskcheck.Probe(ctx, diskcheck.Options{
		Dir:           cfg.DataDir,
		FS:            files,
		Budget:        budget,
		MinFreeBytes:  cfg.MinFreeBytes,
		MinFreeInodes: cfg.MinFreeInodes,
		Descriptors:   descriptorsOf(cfg),
	})
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

// checkDisk is the startup's disk check: its report logged and in the
// gauges. Only ctx's end stops the start; a directory the probe cannot
// use is a warning (the node's own opens say the rest).
func (s *Server) checkDisk(ctx context.Context) error {
	files := s.diskFS
	if files == nil {
		files = vfs.OS{}
	}
	r, err := checkDisk(ctx, s.cfg, time.Duration(s.cfg.DiskCheckBudget), files)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.logger.Warn("disk check could not run", zap.Error(err))
		return nil
	}
	diskcheck.Log(s.logger, r)
	s.disk.Set(r)
	return nil
}
