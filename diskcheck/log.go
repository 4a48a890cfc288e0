package diskcheck

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Log writes a report to a node's log: one line at info with what was
// measured and how long the probe took, then each finding that is not ok
// at its level (a warning at warn, an error at error) with what to do;
// the ok and skipped ones at debug.
func Log(logger *zap.Logger, r Report) {
	logger.Info("disk check",
		zap.String("data_dir", r.Dir), zap.String("fs_type", fsTypeField(r)), zap.String("device", r.FS.Device), zap.String("write_cache", r.FS.WriteCache),
		zap.Duration("duration", r.Duration), zap.Duration("budget", r.Budget), zap.Bool("budget_spent", r.BudgetSpent),
		zap.Int("rounds", r.Rounds), zap.Int("rounds_planned", r.RoundsPlanned),
		zap.Duration("fdatasync_append_p50", r.Append.P50), zap.Duration("fdatasync_append_p99", r.Append.P99), zap.Duration("fdatasync_append_max", r.Append.Max),
		zap.Duration("fdatasync_overwrite_p50", r.Overwrite.P50), zap.Duration("fdatasync_overwrite_p99", r.Overwrite.P99), zap.Duration("fdatasync_overwrite_max", r.Overwrite.Max),
		zap.Duration("dir_fsync_p50", r.DirFsync.P50), zap.Duration("dir_fsync_max", r.DirFsync.Max),
		zap.Int("errors", r.Count(Error)), zap.Int("warnings", r.Count(Warning)))
	for _, f := range r.Findings {
		level := zapcore.DebugLevel
		switch f.Severity {
		case Warning:
			level = zapcore.WarnLevel
		case Error:
			level = zapcore.ErrorLevel
		}
		fields := []zap.Field{zap.String("check", f.Check), zap.String("severity", string(f.Severity)), zap.String("finding", f.Message)}
		if f.Fix != "" {
			fields = append(fields, zap.String("fix", f.Fix))
		}
		logger.Log(level, "disk check: "+f.Check, fields...)
	}
}

func fsTypeField(r Report) string {
	if r.FSErr != nil {
		return "unknown"
	}
	return r.FS.Type
}
