package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/internal/fsys"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Errors a broker branches on, besides partition's.
var (
	ErrPartitionNotFound = errors.New("runtime: partition not found")
	ErrNotAssigned       = errors.New("runtime: partition not assigned to this node")
	ErrNodeClosed        = errors.New("runtime: node closed")
)

// Config configures a Node.
type Config struct {
	// DataDir holds topics/ and the embedded metastore's file.
	DataDir string
	// FS is the file system; default the real one.
	FS fsys.FS
	// Codec encodes new frames (storage.codec); default none.
	Codec codec.Codec
	// IdleEvictAfter closes a log nobody used for this long; default 30m.
	IdleEvictAfter time.Duration
	// EvictInterval is how often idle eviction runs; default 1m.
	EvictInterval time.Duration
	// QuarantineSweepInterval is how often quarantined directories are
	// checked for reclaim; default 5m.
	QuarantineSweepInterval time.Duration
	// ReaperInterval is how often the reaper sweeps every open log;
	// default 1m (storage-engine.txt, "Retention").
	ReaperInterval time.Duration
	// ColdWalkInterval is how often the cold retention walk sweeps closed
	// logs (storage.cold_retention_walk_ms); 0 turns it off, and the daemon
	// sets coldwalk.DefaultInterval (5m) unless told 0. With it off, idle
	// eviction closes a log only once retention has nothing left to delete
	// in it, since nothing would sweep it closed.
	ColdWalkInterval time.Duration
	// SegmentMaxBytes caps segments; default partition.DefaultSegmentMaxBytes.
	SegmentMaxBytes int64
	// ConsumerOffsetCommitInterval is how often acked consumer progress is
	// written out (storage.consumer_offset_commit_interval_ms); default 1s.
	// Acks are written into the page cache every 100 ms, or this often if
	// shorter.
	ConsumerOffsetCommitInterval time.Duration
	// CheckLockOrder turns on the registry's lock-order checker (tests).
	CheckLockOrder bool
}

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = fsys.OS{}
	}
	if c.Codec == nil {
		c.Codec, _ = codec.ByID(codec.None)
	}
	if c.IdleEvictAfter <= 0 {
		c.IdleEvictAfter = 30 * time.Minute
	}
	if c.ConsumerOffsetCommitInterval <= 0 {
		c.ConsumerOffsetCommitInterval = time.Second
	}
	if c.EvictInterval <= 0 {
		c.EvictInterval = time.Minute
	}
	if c.ReaperInterval <= 0 {
		c.ReaperInterval = time.Minute
	}
	if c.QuarantineSweepInterval <= 0 {
		c.QuarantineSweepInterval = 5 * time.Minute
	}
	return c
}

// Node is the storage node a broker embeds: the registry of open partition
// logs, the policy that opens them (lazy open, incarnation markers and
// quarantine, startup open, idle eviction), and the metastore they are
// checked against.
//
// Invariants: every open log is in the registry and was opened under its
// topic's guard after its directory's incarnation marker matched the
// metastore's record; a log is closed only through the registry.
type Node struct {
	cfg       Config
	ms        Metastore
	logger    *zap.Logger
	metrics   *partition.Metrics
	reg       *supervisor.Registry
	topicsDir string

	ready       atomic.Bool
	closed      atomic.Bool
	unsubscribe func()
	background  sync.WaitGroup // rechecks started by the change feed
	loops       []*supervisor.Loop
	promReg     prometheus.Registerer

	consumers       *consumers
	committer       *committer
	consumerMetrics consumerMetrics

	// dropConsumerState forgets a deleted incarnation's in-memory consumer
	// state; it runs right after the quarantine rename (and in a purge),
	// before the fresh directory exists, so no ack of the deleted
	// incarnation is ever written into the new one.
	dropConsumerState func(topic string, id wire.IncarnationID)
}

// New makes a node; Start opens its partitions.
func New(cfg Config, ms Metastore, logger *zap.Logger, reg prometheus.Registerer) (*Node, error) {
	cfg = cfg.withDefaults()
	if cfg.DataDir == "" {
		return nil, errors.New("runtime: Config.DataDir is required")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	n := &Node{
		cfg:             cfg,
		ms:              ms,
		logger:          logger,
		metrics:         partition.NewMetrics(reg),
		consumerMetrics: newConsumerMetrics(reg),
		topicsDir:       filepath.Join(cfg.DataDir, wire.TopicsDirName),
		promReg:         reg,
	}
	n.consumers = &consumers{n: n, by: map[supervisor.Key]*consumer{}}
	n.committer = &committer{n: n, commitInterval: cfg.ConsumerOffsetCommitInterval,
		dirtySet: map[*consumer]struct{}{}, unsyncedSet: map[*consumer]struct{}{}}
	n.dropConsumerState = n.consumers.drop
	n.reg = supervisor.NewRegistry(supervisor.RegistryOptions{CheckLockOrder: cfg.CheckLockOrder, OnClose: n.consumers.settle})
	if err := cfg.FS.MkdirAll(n.topicsDir); err != nil {
		return nil, fmt.Errorf("runtime: data directory: %w", err)
	}
	if err := cfg.FS.SyncDir(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("runtime: data directory: %w", err)
	}
	return n, nil
}

// Ready reports whether startup has opened every owned partition.
func (n *Node) Ready() bool { return n.ready.Load() }

// LockOrderViolations lists lock-order violations, with the checker on.
func (n *Node) LockOrderViolations() []string { return n.reg.LockOrderViolations() }

// Close closes every open log, each between two commits, and stops the
// node's background work. It returns the errors of the closes.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, l := range n.loops {
		errs = append(errs, l.Close())
	}
	if n.unsubscribe != nil {
		n.unsubscribe()
	}
	n.background.Wait()
	for _, key := range n.reg.Keys() {
		if err := n.reg.CloseLive(key); err != nil {
			errs = append(errs, fmt.Errorf("close %s/%d: %w", key.Topic, key.Partition, err))
		}
	}
	return errors.Join(errs...)
}

func (n *Node) key(topic string, p int) (supervisor.Key, error) {
	if n.closed.Load() {
		return supervisor.Key{}, ErrNodeClosed
	}
	if err := wire.ValidateTopicName(topic); err != nil {
		return supervisor.Key{}, err
	}
	if p < 0 || p > wire.MaxPartitions {
		return supervisor.Key{}, fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, topic, p)
	}
	return supervisor.Key{Topic: topic, Partition: p}, nil
}

// log returns the partition's open log, opening it on first use.
func (n *Node) log(ctx context.Context, key supervisor.Key) (*partition.Log, error) {
	return n.reg.Open(key, func(t *supervisor.GuardedTopic) (*partition.Log, error) {
		return n.openUnderGuard(ctx, t, key)
	})
}

// withLog runs fn on the partition's log, reopening it once if it was
// closed underneath (idle eviction, a retention change).
func (n *Node) withLog(ctx context.Context, key supervisor.Key, fn func(*partition.Log) error) error {
	for attempt := 0; ; attempt++ {
		l, err := n.log(ctx, key)
		if err != nil {
			return err
		}
		err = fn(l)
		if errors.Is(err, partition.ErrLogClosed) && attempt == 0 && !n.closed.Load() {
			continue
		}
		return err
	}
}

// Produce appends and commits records as one group-committable call,
// holding the partition's produce gate shared.
func (n *Node) Produce(ctx context.Context, topic string, p int, records []partition.Record) (base int64, err error) {
	key, err := n.key(topic, p)
	if err != nil {
		return 0, err
	}
	gate := n.reg.Gate(key)
	gate.LockShared()
	defer gate.UnlockShared()
	err = n.withLog(ctx, key, func(l *partition.Log) error {
		base, err = l.Produce(ctx, records)
		return err
	})
	return base, err
}

// AppendCommit is the design's two-step path, Append then CommitDurable,
// under the partition's produce gate held exclusive, so no close and no
// other writer lands between the two.
func (n *Node) AppendCommit(ctx context.Context, topic string, p int, records []partition.Record) (base int64, err error) {
	key, err := n.key(topic, p)
	if err != nil {
		return 0, err
	}
	gate := n.reg.Gate(key)
	gate.Lock()
	defer gate.Unlock()
	l, err := n.log(ctx, key)
	if err != nil {
		return 0, err
	}
	if base, err = l.Append(ctx, records); err != nil {
		return 0, err
	}
	return base, l.CommitDurable(ctx)
}

// Read reads committed records (partition.Log.Read).
func (n *Node) Read(ctx context.Context, topic string, p int, offset int64, maxRecords, maxBytes int) (res partition.ReadResult, err error) {
	key, err := n.key(topic, p)
	if err != nil {
		return res, err
	}
	err = n.withLog(ctx, key, func(l *partition.Log) error {
		res, err = l.Read(offset, maxRecords, maxBytes)
		return err
	})
	return res, err
}

// Log returns the partition's open log, opening it if needed, for callers
// that wait on its NotifyC or read its boundaries.
func (n *Node) Log(ctx context.Context, topic string, p int) (*partition.Log, error) {
	key, err := n.key(topic, p)
	if err != nil {
		return nil, err
	}
	return n.log(ctx, key)
}

// HighWatermark opens the partition if needed and returns its boundary.
func (n *Node) HighWatermark(ctx context.Context, topic string, p int) (int64, error) {
	l, err := n.Log(ctx, topic, p)
	if err != nil {
		return 0, err
	}
	return l.HighWatermark(), nil
}
