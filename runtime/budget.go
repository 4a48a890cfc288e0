package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"syscall"

	"github.com/narad-io/storage/internal/promshare"
	"github.com/narad-io/storage/partition"
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
func DefaultMaxOpenLogs() int { return DefaultMaxOpenLogsBeside(0) }

// DefaultMaxOpenLogsBeside is DefaultMaxOpenLogs for a process that keeps
// reserved descriptors for something else too (an embedder's own
// connections): (limit - DescriptorHeadroom - reserved) /
// DescriptorsPerLog, at least 16.
func DefaultMaxOpenLogsBeside(reserved int) int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY || lim.Cur > math.MaxInt32 {
		return 0
	}
	return max(minOpenLogs, (int(lim.Cur)-DescriptorHeadroom-reserved)/DescriptorsPerLog)
}

// DescriptorsFor is the open-file limit a budget of openLogs logs needs
// beside reserved descriptors (an embedder's own connections): each log's
// DescriptorsPerLog and DescriptorHeadroom, the sum DefaultMaxOpenLogsBeside
// divides the limit by. The disk check holds the limit against it.
func DescriptorsFor(openLogs, reserved int) int {
	return openLogs*DescriptorsPerLog + DescriptorHeadroom + reserved
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

// evictable says whether the budget may close an idle log: with the cold
// walk off, not one retention still has work in (the reaper sweeps only
// open logs), as idle eviction does.
func (n *Node) evictable(_ supervisor.Key, l *partition.Log) bool {
	if n.cfg.ColdWalkInterval > 0 {
		return true
	}
	expired, err := l.Expired(context.Background())
	return err == nil && !expired
}

// openSignals lets a waiter learn that a partition's log opened again,
// without opening it itself: a long poll whose log an eviction closed
// must not reopen it just to wait (it would evict another waiter's log,
// which would do the same: found by review).
//
// Invariant, under mu: each channel in by is open and is closed (and
// removed) by the next open of its partition, or when its topic's
// incarnation is dropped (deleted, or found replaced): a waiter then
// finds the topic gone instead of waiting for an open that never comes.
type openSignals struct {
	mu sync.Mutex
	by map[supervisor.Key]chan struct{}
}

// next returns a channel closed when key's log next opens.
func (o *openSignals) next(key supervisor.Key) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.by == nil {
		o.by = map[supervisor.Key]chan struct{}{}
	}
	ch := o.by[key]
	if ch == nil {
		ch = make(chan struct{})
		o.by[key] = ch
	}
	return ch
}

// opened is the registry's OnOpen: it wakes key's waiters.
func (o *openSignals) opened(key supervisor.Key, _ *partition.Log) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch := o.by[key]; ch != nil {
		close(ch)
		delete(o.by, key)
	}
}

// gone wakes the waiters of every partition of topic.
func (o *openSignals) gone(topic string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, ch := range o.by {
		if key.Topic == topic {
			close(ch)
			delete(o.by, key)
		}
	}
}

// LogIfOpen returns the partition's log if it is open, without opening
// it.
func (n *Node) LogIfOpen(topic string, p int) (*partition.Log, bool) {
	l, ok := n.reg.Lookup(supervisor.Key{Topic: topic, Partition: p})
	if !ok || l.Closed() {
		return nil, false
	}
	return l, true
}

// LogOpened returns a channel closed the next time the partition's log
// is opened (by a produce, a read with records to serve, ...), or when
// its topic's incarnation is dropped (the topic deleted or recreated): a
// waiter whose log was closed under it waits on it rather than reopening
// the log itself. Take it before checking LogIfOpen and the topic's
// record, so no open and no delete is missed.
func (n *Node) LogOpened(topic string, p int) <-chan struct{} {
	return n.opens.next(supervisor.Key{Topic: topic, Partition: p})
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
	counted := map[*partition.CacheBudget]bool{} // nodes with no budget of their own share the process's
	for _, n := range c.sorted() {
		limit += float64(n.reg.MaxOpen())
		evictions += float64(n.reg.Evictions())
		if b := n.cacheBudget; !counted[b] {
			counted[b] = true
			cached += float64(b.Used())
			cacheLimit += float64(b.Limit())
		}
	}
	ch <- prometheus.MustNewConstMetric(openLogsLimitDesc, prometheus.GaugeValue, limit)
	ch <- prometheus.MustNewConstMetric(budgetEvictionsDesc, prometheus.CounterValue, evictions)
	ch <- prometheus.MustNewConstMetric(frameCacheBytesDesc, prometheus.GaugeValue, cached)
	ch <- prometheus.MustNewConstMetric(frameCacheLimitDesc, prometheus.GaugeValue, cacheLimit)
}
