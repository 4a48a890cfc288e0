package server

import (
	"context"
	"fmt"

	"github.com/narad-io/storage/runtime"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// warnIfFewDescriptors says at start when the node's open-log budget
// cannot hold every partition on disk open at once: it still serves them
// all, but each open past the budget closes the least recently used idle
// log first, so a workload touching more partitions than the budget pays
// a close and an open per touch.
func warnIfFewDescriptors(ctx context.Context, node *runtime.Node, maxOpenLogs int, logger *zap.Logger) {
	if maxOpenLogs == 0 {
		maxOpenLogs = runtime.DefaultMaxOpenLogs()
	}
	if maxOpenLogs <= 0 {
		return
	}
	owned, err := node.Partitions(ctx)
	if err != nil {
		return
	}
	partitions := len(owned)
	if partitions > maxOpenLogs {
		var lim unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
		logger.Warn("more partitions on disk than the open-log budget: past it, each open first closes the least recently used idle log",
			zap.Int("partitions", partitions), zap.Int("max_open_logs", maxOpenLogs), zap.Uint64("open_file_limit", lim.Cur),
			zap.String("fix", fmt.Sprintf("raise the open-file limit (LimitNOFILE= in the unit, ulimit -n) to %d, or --max-open-logs",
				runtime.DescriptorsFor(partitions, 0))))
	}
}
