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
	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Errors a broker branches on, besides partition's.
var (
	ErrPartitionNotFound = errors.New("runtime: partition not found")
	ErrNotAssigned       = errors.New("runtime: partition not assigned to this node")
	ErrNodeClosed        = errors.New("runtime: node closed")
)

// Config configures a Node. DataDir is required; every other field has
// the default its comment gives.
type Config struct {
	// DataDir holds topics/ and the embedded metastore's file.
	DataDir string
	// Metastore holds the topic records every open is checked against.
	// Default: the embedded single-node metastore in DataDir
	// (OpenLocalMetastore), opened under the data directory's lock.
	Metastore Metastore
	// Logger receives the node's logs. Default: none.
	Logger *zap.Logger
	// Registerer receives the node's metrics (docs/metrics.md). Default:
	// none. Nodes may share one: they share its collectors (node-wide
	// series sum over them), and the per-topic and per-partition series
	// cover every node on it, a topic name once; to tell nodes that hold
	// topics of one name apart, give each a registerer wrapped with a node
	// label (prometheus.WrapRegistererWith). New panics on a registerer
	// holding other metrics of the same names.
	Registerer prometheus.Registerer
	// MetricsByTopic sums the per-partition gauges (high watermark,
	// consumer lag and leased records, cursor lag) per topic instead:
	// a scrape then grows with topics and cursors, not with partitions
	// (docs/metrics.md, "Topics and partitions"). Default: per partition.
	MetricsByTopic bool
	// FS is the file system; default the real one.
	FS vfs.FS
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
	// default 1m (docs/design.md, "Retention").
	ReaperInterval time.Duration
	// ColdWalkInterval is how often the cold retention walk sweeps closed
	// logs (storage.cold_retention_walk_ms); 0 turns it off, and the daemon
	// sets coldwalk.DefaultInterval (5m) unless told 0. With it off, idle
	// eviction closes a log only once retention has nothing left to delete
	// in it, since nothing would sweep it closed.
	ColdWalkInterval time.Duration
	// ScrubRate is the most bytes a second the scrubber reads while it
	// checks every sealed segment the node owns (docs/design.md,
	// "Scrubber"); 0 turns it off, and the daemon sets
	// scrub.DefaultRate (4 MiB/s) unless told 0.
	ScrubRate int64
	// SegmentMaxBytes caps segments; default partition.DefaultSegmentMaxBytes.
	SegmentMaxBytes int64
	// ConsumerOffsetCommitInterval is how often acked consumer progress is
	// written out (storage.consumer_offset_commit_interval_ms); default 1s.
	// Acks are written into the page cache every 100 ms, or this often if
	// shorter.
	ConsumerOffsetCommitInterval time.Duration
	// MaxOpenLogs is the node's budget of logs open at once, and so of
	// the descriptors and frame caches they hold: an open past it first
	// closes the least recently used idle log (cleanly, between two
	// commits: hwm file written, consumer progress settled), and a call
	// that finds every open log in use fails with ErrBusy. Default (0):
	// DefaultMaxOpenLogs, from the open-file limit; negative: no bound.
	MaxOpenLogs int
	// FrameCacheBytes bounds the decoded frames the node's open logs keep
	// cached for tail readers, together (each log also keeps at most 8
	// frames and 2 MiB, besides one larger frame a read stopped inside):
	// a log over it drops its own oldest frames, and a
	// closed log gives its bytes back. Default (0): DefaultFrameCacheBytes;
	// negative: no bound of the node's own: its logs share the partition
	// package's process-wide one (partition.DefaultCacheBudgetBytes) with
	// every log of the process opened without a budget.
	FrameCacheBytes int64
	// MinFreeBytes and MinFreeInodes are the floor of free space the data
	// directory's file system keeps: a produce or append whose commit
	// would take it under (its frame and a roll's files, counted by the
	// partition: partition/space.go) is refused (ErrLowDisk, wrapping
	// partition.ErrNoSpace) before anything is written, and taken again
	// once retention (or anything) frees space; space prepared ahead of
	// the frames is prepared only above it. 0 is no floor.
	MinFreeBytes, MinFreeInodes uint64
	// Testing holds knobs for tests; nil in production.
	Testing *TestOptions
	// DataDirLock is the data directory's lock, for a caller that took it
	// first (datadir.Acquire) to read the embedded metastore under it; the
	// node then owns it and Close releases it. Nil: New takes it.
	DataDirLock *datadir.Lock
}

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.OS{}
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
	if c.FrameCacheBytes == 0 {
		c.FrameCacheBytes = DefaultFrameCacheBytes
	}
	if c.MaxOpenLogs == 0 {
		c.MaxOpenLogs = DefaultMaxOpenLogs()
	}
	if c.QuarantineSweepInterval <= 0 {
		c.QuarantineSweepInterval = 5 * time.Minute
	}
	return c
}

// Node is the storage node a broker embeds: the registry of open partition
// logs, the policy that opens them (lazy open, incarnation markers and
// quarantine, startup open, idle eviction), and the metastore they are
// checked against. Its methods are the data path a broker calls, but for
// the storage side of partition moves, which a cluster's node calls
// (moves_*.go; package doc, "Moves").
//
// Invariants: every open log is in the registry and was opened under its
// topic's guard after its directory's incarnation marker matched the
// metastore's record; a log is closed only through the registry.
type Node struct {
	cfg       Config
	lock      *datadir.Lock // held from New until Close has closed every log
	ms        Metastore
	logger    *zap.Logger
	metrics   *partition.Metrics
	reg       *supervisor.Registry
	topicsDir string

	ready       atomic.Bool
	closed      atomic.Bool
	lifecycle   sync.Mutex // guards loops and unsubscribe against a Close racing Start
	unsubscribe func()
	background  sync.WaitGroup // rechecks started by the change feed
	// backgroundCtx is the rechecks' context, ended by Close before it
	// waits for them: one waiting on the metastore (a cluster's etcd
	// unreachable) never holds a close up.
	backgroundCtx context.Context
	endBackground context.CancelFunc
	loops         []*supervisor.Loop
	reaper        atomic.Pointer[supervisor.Loop] // set once Start starts it; retainInPlace triggers it
	reapAsked     atomic.Bool                     // a retention change asked for a reaper pass (so Start's reaper runs one at once)
	promReg       prometheus.Registerer

	installs  unsettledInstalls // installs to settle before their partition opens
	receiving sync.Map          // supervisor.Key -> *Receiver: the receive of a partition under way, one at a time
	opens     openSignals       // waiters for a partition's log to open again
	vouched   vouchedTopics     // incarnation checks remembered while a topic has a log open

	consumers         *consumers
	watches           topicWatches // wake-ups of topic-wide waits (topic_wait.go)
	queues            *queues      // leases of queue consumes, and the consumers parked
	cursors           *cursors     // fan-out cursors' positions
	committer         *committer
	consumerMetrics   consumerMetrics
	topicMetrics      topicMetrics
	marks             *partitionMarks        // high watermarks for the per-partition gauge
	dictionaries      topicDictionaries      // each topic's zstd dictionaries, loaded on first use
	autoTrainings     autoTrainings          // each topic's records counted for its automatic dictionary
	dictionaryMetrics dictionaryMetrics      // the trainings, counted
	unregisterHWM     func()                 // takes the node out of its registerer's gauge
	disk              *diskGuard             // the floor of free space produce keeps
	cacheBudget       *partition.CacheBudget // shared by the open logs' frame caches: the node's own, or the process's (partition.ProcessCacheBudget)
	unregisterDisk    func()                 // takes the node out of its registerer's disk gauges
	unregisterLimit   func()                 // takes the node out of its registerer's budget metrics
	unregisterLag     func()                 // takes the node out of its registerer's lag gauges

	// dropConsumerState forgets a deleted incarnation's in-memory consumer
	// state; it runs right after the quarantine rename (and in a purge),
	// before the fresh directory exists, so no ack of the deleted
	// incarnation is ever written into the new one.
	dropConsumerState func(topic string, id wire.IncarnationID)
}

// TestOptions are knobs for the engine's tests and an embedder's: they
// cost what a production node must not pay.
type TestOptions struct {
	// CheckLockOrder turns on the registry's lock-order checker: every
	// lock taken out of the design's order is recorded, and
	// Node.LockOrderViolations lists them. It reads a stack per lock.
	CheckLockOrder bool
	// Serial makes the node's own parallel work run one task at a time, in
	// a fixed order: Start checks and opens partitions with one worker,
	// topic by topic, Close closes its logs one by one in key order. A
	// simulation that replays a run's file calls exactly needs it; the
	// scheduler would order them otherwise.
	Serial bool
}

// New makes a node; Start opens its partitions. It registers its metrics,
// then takes the data directory's lock (datadir.ErrLocked if another
// holder has it) before it reads or writes anything there, opens the
// embedded metastore unless Config gives one (logging at error what it
// recovered from, if anything), then finishes or removes what a crash
// left of a partition install (recoverInstalls).
func New(cfg Config) (n *Node, err error) {
	cfg = cfg.withDefaults()
	lock := cfg.DataDirLock
	cfg.DataDirLock = nil
	defer func() {
		if err != nil && lock != nil {
			lock.Release()
		}
	}()
	if cfg.DataDir == "" {
		return nil, errors.New("runtime: Config.DataDir is required")
	}
	logger, reg := cfg.Logger, cfg.Registerer
	if logger == nil {
		logger = zap.NewNop()
	}
	// Metrics first: a registration that conflicts panics, and must do so
	// before the data directory's lock is taken.
	metrics, consumerMetrics, topicMetrics := partition.NewMetrics(reg), newConsumerMetrics(reg), newTopicMetrics(reg)
	if lock == nil {
		var taken *datadir.Lock
		if taken, err = datadir.Acquire(cfg.FS, cfg.DataDir); err != nil {
			return nil, err
		}
		lock = taken
	}
	if filepath.Clean(lock.Dir()) != filepath.Clean(cfg.DataDir) {
		return nil, fmt.Errorf("runtime: Config.DataDirLock locks %s, not the data directory %s", lock.Dir(), cfg.DataDir)
	}
	ms := cfg.Metastore
	if ms == nil {
		local, err := OpenLocalMetastore(cfg.FS, cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("runtime: metastore: %w", err)
		}
		if damage := local.Recovered(); damage != "" {
			logger.Error("metastore file damaged; serving what survived, which the next change rewrites both files from", zap.String("damage", damage))
		}
		ms = local
	}
	n = &Node{
		cfg:             cfg,
		lock:            lock,
		ms:              ms,
		logger:          logger,
		metrics:         metrics,
		consumerMetrics: consumerMetrics,
		topicMetrics:    topicMetrics,
		marks:           newPartitionMarks(),
		topicsDir:       filepath.Join(cfg.DataDir, wire.TopicsDirName),
		disk:            &diskGuard{files: cfg.FS, dir: cfg.DataDir, minBytes: cfg.MinFreeBytes, minIn: cfg.MinFreeInodes, logger: logger},
		promReg:         reg,
	}
	n.backgroundCtx, n.endBackground = context.WithCancel(context.Background())
	n.cacheBudget = partition.ProcessCacheBudget()
	if cfg.FrameCacheBytes > 0 {
		n.cacheBudget = partition.NewCacheBudget(cfg.FrameCacheBytes)
	}
	n.consumers = &consumers{n: n, by: map[supervisor.Key]*consumer{}}
	n.committer = &committer{n: n, commitInterval: cfg.ConsumerOffsetCommitInterval,
		dirtySet: map[*consumer]struct{}{}, unsyncedSet: map[*consumer]struct{}{}}
	n.queues = newQueues(n)
	n.cursors = newCursors(n, reg)
	n.dropConsumerState = func(topic string, id wire.IncarnationID) {
		n.consumers.drop(topic, id)
		n.queues.drop(topic)
		n.watches.drop(topic)
		n.cursors.forget(ofTopic(topic))
		n.opens.gone(topic)
	}
	n.reg = supervisor.NewRegistry(supervisor.RegistryOptions{
		CheckLockOrder: cfg.Testing != nil && cfg.Testing.CheckLockOrder,
		OnClose:        n.onClose,
		OnEvict:        n.onEvict,
		OnOpen:         n.onOpen,
		Evictable:      n.evictable,
		MaxOpen:        max(cfg.MaxOpenLogs, 0),
	})
	if err := vfs.MkdirAllDurable(cfg.FS, n.topicsDir); err != nil {
		return nil, fmt.Errorf("runtime: data directory: %w", err)
	}
	// A process that crashed may have left entries here that only the
	// page cache holds (a directory created before its parent's sync):
	// make them durable before anything is acked into them.
	for _, dir := range []string{cfg.DataDir, n.topicsDir} {
		if err := cfg.FS.SyncDir(dir); err != nil {
			return nil, fmt.Errorf("runtime: data directory: sync %s: %w", dir, err)
		}
	}
	if err := n.recoverInstalls(); err != nil {
		return nil, fmt.Errorf("runtime: startup: %w", err)
	}
	n.unregisterHWM = registerHWM(reg, n)
	n.unregisterDisk = registerDisk(reg, n)
	n.unregisterLimit = registerBudget(reg, n)
	n.unregisterLag = registerLag(reg, n)
	return n, nil
}

// closeParallelism bounds the logs Close closes at once: each close is an
// fdatasync of its hwm file, which a device serves many of at a time.
const closeParallelism = 64

// serial reports whether TestOptions.Serial is set.
func (n *Node) serial() bool { return n.cfg.Testing != nil && n.cfg.Testing.Serial }

// closeAllLive closes every open log once the registry is fenced (Close),
// each between two commits. A topic's closes would serialize on its guard,
// so the work of each (the final drain, the hwm file written and synced)
// runs first, in parallel and bounded, under each partition's produce gate
// alone: after the fence nothing else runs under a topic guard, and no log
// opens. The registry's own close of each, under the guard, then finds the
// log closed and only settles what sits beside it (consumer progress).
func (n *Node) closeAllLive() []error {
	keys := n.reg.Keys()
	var mu sync.Mutex
	var errs []error
	fail := func(key supervisor.Key, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Errorf("close %s/%d: %w", key.Topic, key.Partition, err))
	}
	var g errgroup.Group
	g.SetLimit(closeParallelism)
	if n.serial() {
		g.SetLimit(1)
	}
	for _, key := range keys {
		g.Go(func() error {
			gate := n.reg.Gate(key)
			gate.Lock()
			defer gate.Unlock()
			if l, ok := n.reg.Lookup(key); ok {
				if err := l.Close(); err != nil {
					fail(key, err)
				}
			}
			return nil
		})
	}
	g.Wait()
	for _, key := range keys {
		// The log is closed: this drops it and settles its consumer
		// state under the guard; its close error was reported above.
		n.reg.CloseLive(key)
	}
	return errs
}

// onClose runs after the registry closed a log, under its topic's guard:
// the consumer state beside it is settled, and its boundary remembered.
func (n *Node) onClose(key supervisor.Key, l *partition.Log) {
	n.consumers.settle(key)
	n.marks.close(key, l)
	n.vouched.closed(key.Topic)
}

// onOpen runs after the registry installed a log, under its topic's
// guard: its waiters are woken, and the topic's open logs counted.
func (n *Node) onOpen(key supervisor.Key, l *partition.Log) {
	n.vouched.opened(key.Topic)
	n.opens.opened(key, l)
}

// Ready reports whether Start has finished: every owned partition's
// boundary on disk, and as many open as the budget holds.
func (n *Node) Ready() bool { return n.ready.Load() }

// LockOrderViolations lists lock-order violations, with the checker on.
func (n *Node) LockOrderViolations() []string { return n.reg.LockOrderViolations() }

// Close closes every open log, each between two commits, and stops the
// node's background work. It returns the errors of the closes. Guarded
// work under way (an install, a purge) finishes first, and the data
// directory's lock is released last (runtime/doc.go, "Eviction and
// reopen").
func (n *Node) Close() error {
	n.lifecycle.Lock()
	if n.closed.Swap(true) {
		n.lifecycle.Unlock()
		return nil
	}
	loops, unsubscribe := n.loops, n.unsubscribe
	n.lifecycle.Unlock()
	var errs []error
	for _, l := range loops {
		errs = append(errs, l.Close())
	}
	if unsubscribe != nil {
		unsubscribe()
	}
	n.endBackground()
	n.background.Wait()
	n.reg.Close()
	errs = append(errs, n.closeAllLive()...)
	n.queues.close()
	n.watches.wakeAll()
	errs = append(errs, n.cursors.close()...)
	n.unregisterHWM()
	n.unregisterDisk()
	n.unregisterLimit()
	n.unregisterLag()
	if err := n.lock.Release(); err != nil {
		errs = append(errs, fmt.Errorf("release the data directory's lock: %w", err))
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
	if p < 0 || p >= wire.MaxPartitions {
		return supervisor.Key{}, fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, topic, p)
	}
	return supervisor.Key{Topic: topic, Partition: p}, nil
}

// log returns the partition's open log, opening it on first use; once
// Close has begun, ErrNodeClosed; with no slot or descriptor free,
// ErrBusy.
func (n *Node) log(ctx context.Context, key supervisor.Key) (*partition.Log, error) {
	l, err := n.reg.Open(key, func(t *supervisor.GuardedTopic) (*partition.Log, error) {
		return n.openUnderGuard(ctx, t, key)
	})
	return l, busyError(nodeClosedError(err))
}

// withTopic runs fn under the topic's guard (supervisor.Registry.WithTopic);
// once Close has begun, ErrNodeClosed.
func (n *Node) withTopic(topic string, fn func(t *supervisor.GuardedTopic) error) error {
	return nodeClosedError(n.reg.WithTopic(topic, fn))
}

// nodeClosedError says ErrNodeClosed for the registry's fence.
func nodeClosedError(err error) error {
	if errors.Is(err, supervisor.ErrRegistryClosed) {
		return fmt.Errorf("%w: %w", ErrNodeClosed, err)
	}
	return err
}

// withLog runs fn on the partition's log, reopening it whenever it was
// closed underneath (idle eviction, the open-log budget), until fn meets
// an open log, the node closes (ErrNodeClosed, whichever way its race
// with Close went) or ctx ends. fn's error at the open-file limit says
// ErrBusy. Once is not enough: a log can be closed again between its
// reopen and fn (two eviction passes, an eviction and the budget). It
// never spins on one closed log: the registry drops a log before closing
// it, and reopens one closed behind its back, so each lookup returns a
// log that was open.
func (n *Node) withLog(ctx context.Context, key supervisor.Key, fn func(*partition.Log) error) error {
	for {
		l, err := n.log(ctx, key)
		if err != nil {
			return err
		}
		err = fn(l)
		if errors.Is(err, partition.ErrLogClosed) && n.closed.Load() {
			// Close closed it: the open won the race with Close's fence,
			// and the caller learns what losing it would have said.
			return fmt.Errorf("%w: %w", ErrNodeClosed, err)
		}
		if !errors.Is(err, partition.ErrLogClosed) || ctx.Err() != nil {
			return busyError(err)
		}
	}
}

// Produce appends and commits records as one group-committable call,
// holding the partition's produce gate shared.
func (n *Node) Produce(ctx context.Context, topic string, p int, records []partition.Record) (base int64, err error) {
	key, err := n.key(topic, p)
	if err != nil {
		return 0, err
	}
	if err := n.metastoreBroken(); err != nil {
		return 0, err
	}
	defer func() {
		if err == nil {
			n.countForDictionary(topic, len(records)) // after the gate's release
		}
	}()
	gate := n.reg.Gate(key)
	gate.LockShared()
	defer gate.UnlockShared()
	err = n.withLog(ctx, key, func(l *partition.Log) error {
		base, err = l.Produce(ctx, records)
		return err
	})
	if err == nil {
		n.topicMetrics.countProduce(topic, records)
	}
	return base, err
}

// metastoreBroken refuses a produce once the embedded metastore could not
// take a failed change back on disk (LocalMetastore.Broken): its files
// may hold a delete memory does not, which a crash would apply to what
// the produce acked. A produce already past this check overlapped the
// failing change, whose outcome is unknown anyway: it is acked, and a
// crash applying the change is that change taking effect.
func (n *Node) metastoreBroken() error {
	if b, ok := n.ms.(interface{ Broken() bool }); ok && b.Broken() {
		return ErrMetastoreBroken
	}
	return nil
}

// AppendCommit is the design's two-step path, Append then CommitDurable,
// under the partition's produce gate held exclusive, so no close and no
// other writer lands between the two.
func (n *Node) AppendCommit(ctx context.Context, topic string, p int, records []partition.Record) (base int64, err error) {
	key, err := n.key(topic, p)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err == nil {
			n.countForDictionary(topic, len(records)) // after the gate's release
		}
	}()
	gate := n.reg.Gate(key)
	gate.Lock()
	defer gate.Unlock()
	l, err := n.log(ctx, key)
	if err != nil {
		return 0, err
	}
	if err := n.metastoreBroken(); err != nil {
		return 0, err
	}
	if base, err = l.Append(ctx, records); err != nil {
		return 0, busyError(err)
	}
	if err := l.CommitDurable(ctx); err != nil {
		return base, busyError(err)
	}
	n.topicMetrics.countProduce(topic, records)
	return base, nil
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
	if err == nil {
		n.topicMetrics.countFetch(topic, res)
	}
	return res, err
}

// ReadFunc lends committed records to fn (partition.Log.ReadFunc): Key
// and Value are valid only until fn returns. An error from fn ends the
// read and is returned as it is, with Next at the record fn refused.
func (n *Node) ReadFunc(ctx context.Context, topic string, p int, offset int64, maxRecords, maxBytes int, fn func(partition.ReadRecord) error) (sum partition.ReadSummary, err error) {
	key, err := n.key(topic, p)
	if err != nil {
		return sum, err
	}
	var refused error // fn's: never retried, so fn never sees a record twice
	lend := func(r partition.ReadRecord) error {
		if refused = fn(r); refused != nil {
			return refused
		}
		return nil
	}
	err = n.withLog(ctx, key, func(l *partition.Log) error {
		sum, err = l.ReadFunc(offset, maxRecords, maxBytes, lend)
		if refused != nil {
			return errRefused
		}
		return err
	})
	if sum.Records > 0 {
		n.topicMetrics.countFetched(topic, sum.Records, sum.Bytes)
	}
	if refused != nil {
		return sum, refused
	}
	return sum, err
}

// errRefused ends a ReadFunc whose fn returned an error.
var errRefused = errors.New("the read's fn refused a record")

// OffsetAt returns the offset of the first record committed at or after
// atMs (partition.Log.OffsetAt), or the high watermark when none is.
func (n *Node) OffsetAt(ctx context.Context, topic string, p int, atMs int64) (offset int64, err error) {
	key, err := n.key(topic, p)
	if err != nil {
		return 0, err
	}
	err = n.withLog(ctx, key, func(l *partition.Log) error {
		offset, err = l.OffsetAt(atMs)
		return err
	})
	return offset, err
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
