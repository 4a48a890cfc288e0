package runtime

import (
	"errors"
	"fmt"
	"math"
	"syscall"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/narad-io/storage/supervisor"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// ErrBusy: the node has no open-log slot or descriptor free for the call
// right now. Every log within the budget (Config.MaxOpenLogs) is in use,
// or the process met its open-file limit (EMFILE, ENFILE). Nothing was
// written and no log was harmed (docs/durability.md row 30): retry
// shortly.
var ErrBusy = errors.New("runtime: no open-log slot or descriptor free; retry")

// The open-log budget a node derives from the open-file limit: each open
// log holds at most DescriptorsPerLog descriptors (its active segment, two
// hot sealed segments, consumer.ahead), and DescriptorHeadroom are left to
// sockets, the metastore, the runtime and the short-lived opens of
// commits, closes and directory syncs.
const (
	DescriptorsPerLog  = 4
	DescriptorHeadroom = 256
	minOpenLogs        = 16
)

// DefaultMaxOpenLogs is the open-log budget the process's open-file limit
// (RLIMIT_NOFILE, soft) allows: (limit - DescriptorHeadroom) /
// DescriptorsPerLog, at least 16; 0 (no bound) when the limit is
// unlimited or unknown.
func DefaultMaxOpenLogs() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY || lim.Cur > math.MaxInt32 {
		return 0
	}
	return max(minOpenLogs, (int(lim.Cur)-DescriptorHeadroom)/DescriptorsPerLog)
}

// DefaultFrameCacheBytes is the node's default bound on cached decoded
// frames (Config.FrameCacheBytes).
const DefaultFrameCacheBytes = 512 << 20

// busyError says ErrBusy for the ways a call can find no slot or no
// descriptor: the registry's budget full of logs in use, or the
// process's open-file limit.
func busyError(err error) error {
	if err == nil || errors.Is(err, ErrBusy) {
		return err
	}
	if errors.Is(err, supervisor.ErrNoRoom) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return err
}

// onEvict logs a log closed to make room within the budget.
func (n *Node) onEvict(key supervisor.Key, err error) {
	if err != nil {
		n.logger.Warn("open-log budget: closing the least recently used log", zap.String("topic", key.Topic), zap.Int("partition", key.Partition), zap.Error(err))
		return
	}
	n.logger.Debug("open-log budget: closed the least recently used log", zap.String("topic", key.Topic), zap.Int("partition", key.Partition))
}

var (
	openLogsLimitDesc = prometheus.NewDesc("narad_storage_open_logs_limit",
		"The budget of partition logs open at once (0: none); past it the least recently used idle log is closed first.", nil, nil)
	budgetEvictionsDesc = prometheus.NewDesc("narad_storage_open_log_budget_evictions_total",
		"Idle logs closed to make room for another within the open-log budget.", nil, nil)
	frameCacheBytesDesc = prometheus.NewDesc("narad_storage_frame_cache_bytes",
		"Decoded frame bytes the open logs keep cached for tail readers.", nil, nil)
	frameCacheLimitDesc = prometheus.NewDesc("narad_storage_frame_cache_limit_bytes",
		"The bound on cached decoded frame bytes (0: none but each log's 2 MiB).", nil, nil)
)

// budgetCollector reports the open-log and frame cache budgets of the
// nodes on one registerer, summed.
type budgetCollector struct{ nodeSet }

// registerBudget adds n to reg's budget collector and returns what
// removes it.
func registerBudget(reg prometheus.Registerer, n *Node) (remove func()) {
	return promshare.Register(reg, &budgetCollector{}).join(n)
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- openLogsLimitDesc
	ch <- budgetEvictionsDesc
	ch <- frameCacheBytesDesc
	ch <- frameCacheLimitDesc
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	var limit, evictions, cached, cacheLimit float64
	for _, n := range c.sorted() {
		limit += float64(n.reg.MaxOpen())
		evictions += float64(n.reg.Evictions())
		if b := n.cacheBudget; b != nil {
			cached += float64(b.Used())
			cacheLimit += float64(b.Limit())
		}
	}
	ch <- prometheus.MustNewConstMetric(openLogsLimitDesc, prometheus.GaugeValue, limit)
	ch <- prometheus.MustNewConstMetric(budgetEvictionsDesc, prometheus.CounterValue, evictions)
	ch <- prometheus.MustNewConstMetric(frameCacheBytesDesc, prometheus.GaugeValue, cached)
	ch <- prometheus.MustNewConstMetric(frameCacheLimitDesc, prometheus.GaugeValue, cacheLimit)
}
