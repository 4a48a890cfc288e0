package simulation

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
)

// The node's settings in every run: background loops fast enough that a
// short run of fake time sees evictions, reaper sweeps and cold walks.
// Their intervals are distinct primes of microseconds (the consumer
// committer's own tick is 100 ms), so no two loops started together ever
// tick together in a run (settle.go).
const (
	dataDir         = "/data"
	reaperEvery     = 999_983 * time.Microsecond
	coldWalkEvery   = 2_000_003 * time.Microsecond
	idleEvictAfter  = 3 * time.Second
	evictEvery      = 1_000_003 * time.Microsecond
	writeOutEvery   = 1_000_033 * time.Microsecond // ConsumerOffsetCommitInterval
	quarantineEvery = 3_600_000_011 * time.Microsecond
	retentionWithin = reaperEvery + coldWalkEvery + 1500*time.Millisecond
	// ackWindow is how far before a crash an ack may be lost: one
	// write-out interval, the 100 ms tick that puts acks in the page cache
	// before it, and 100 ms of slack (docs/durability.md: consumer
	// progress steps back by at most one write-out interval).
	ackWindow = writeOutEvery + 200*time.Millisecond
	// keptAhead: after a crash, acks above the frontier older than the
	// window must survive while the acked-ahead set held at most this many
	// offsets (a consumer.ahead slot holds at least 2,000 of offsets below
	// 16,384; past it the slot keeps the lowest, wire.AheadRecord).
	keptAhead = 1000
)

// Result is what one run did.
type Result struct {
	Ops, Crashes, Faults int
	Live                 LiveCounts // cursors, long polls, concurrent producers, the floor (model_live.go)
	Pairs                []string   // "operation: fault" for each fault that fired (ops_faultkit.go)
	// Violation is the first disagreement of the node with the model,
	// empty when there was none; Check is the check it failed (its
	// message before the numbers), what a shrunk run must fail again; Log
	// is the operations the run made, each line of operation i headed
	// "i:".
	Violation, Check string
	Log              []string
	// Ran lists the operations the run ran, by their index in the whole
	// run; a violation stopped it at the last.
	Ran []int
	// Trace identifies the run's file calls and crash images, in order,
	// and Calls counts the calls (trace.go): two executions of a run
	// replay it exactly when both are equal.
	Trace uint64
	Calls int
	Lines []string
}

// violation stops a run: the first disagreement is the one reported.
type violation struct{ msg, check string }

// runner is one run: its random source, disk, node and model.
type runner struct {
	ctx      context.Context
	rng      *rand.Rand
	d        *sim.Disk
	n        *runtime.Node
	maxOpen  int
	segBytes int64
	big      bool
	topics   []*topicModel
	gens     map[string]int
	op       int // the operation running, -1 outside one
	res      Result
	live     liveState
	trace    *trace
	feed     *feed    // the current node's metastore's change notifications
	cl       *cluster // a cluster run's members (cluster.go); nil in a single-node run
}

// Run runs the workload of (seed, run) on a fresh simulated disk and
// checks the node against the model after every operation. It must run in
// a testing/synctest bubble: it sleeps on the bubble's clock. The same
// (seed, run, opts) makes the same file calls every time (settle.go).
func Run(seed uint64, run int, opts Options) (res Result) {
	r := &runner{ctx: context.Background(), rng: rand.New(rand.NewPCG(seed, uint64(run))), gens: map[string]int{}, op: -1, trace: newTrace(opts.keepTrace)}
	clustered := clusterRun(seed, run)
	if !clustered {
		r.d = sim.NewDisk(r.rng.Uint64())
		r.trace.attach(r.d)
	}
	r.maxOpen = 1 + r.rng.IntN(2)
	r.segBytes = int64(1024 + r.rng.IntN(3072))
	// One run in 12 is long and produce-heavy: acked-ahead sets past a
	// consumer.ahead slot need thousands of records.
	r.big = r.rng.IntN(12) == 0 && !clustered
	ops := 40 + r.rng.IntN(41)
	if r.big {
		ops = 400
	}
	r.logf("run: max open logs %d, segments of %d B, %d operations (long: %v, cluster: %v)", r.maxOpen, r.segBytes, ops, r.big, clustered)
	defer func() {
		if p := recover(); p != nil {
			v, ok := p.(violation)
			if !ok {
				panic(p)
			}
			r.res.Violation, r.res.Check = v.msg, v.check
		}
		if r.cl != nil {
			r.closeMembers()
		} else {
			if r.n != nil {
				r.n.Close()
			}
			r.d.SetHook(nil)
			r.trace.disk(r.d)
		}
		r.res.Trace, r.res.Calls, r.res.Lines = r.trace.sum.Sum64(), r.trace.calls, r.trace.lines
		res = r.res
	}()
	if clustered {
		r.newCluster()
	} else {
		r.start()
	}
	topics := 1 + r.rng.IntN(2)
	if r.big {
		topics = 1
	}
	for i := range topics {
		r.create(fmt.Sprintf("t%d", i))
	}
	r.checkAll(true)
	for i := range ops {
		if !opts.runs(i) {
			continue
		}
		r.settle()
		r.op, r.rng = i, opRand(seed, run, i)
		r.res.Ran = append(r.res.Ran, i)
		r.step()
		r.res.Ops++
		r.settle()
		r.checkAll(false)
		if opts.plant != nil {
			if msg := opts.plant(r.res.Log); msg != "" {
				r.failf("planted: %s", msg)
			}
		}
		r.op = -1
	}
	r.logf("final check")
	r.settle()
	r.checkAll(true)
	return r.res
}

// logf appends one line to the run's operation list.
func (r *runner) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if r.op >= 0 {
		line = fmt.Sprintf("%d: %s", r.op, line)
	}
	r.res.Log = append(r.res.Log, line)
	r.trace.note(r.res.Log[len(r.res.Log)-1])
}

// failf stops the run with a violation.
func (r *runner) failf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.logf("VIOLATION: %s", msg)
	panic(violation{msg, format})
}

// must fails the run on an error no operation of the workload may meet:
// no fault is in force outside the operations that inject one (and check
// what they answer themselves), so every call must succeed.
func (r *runner) must(what string, err error) {
	if err != nil {
		r.failf("%s: unexpected error: %v", what, err)
	}
}

// retryBusy runs f again while the open-log budget is full (ErrBusy: a
// background sweep holds the only slot), letting the bubble settle first.
func retryBusy(f func() error) error {
	for try := 0; ; try++ {
		synctest.Wait()
		err := f()
		if !errors.Is(err, runtime.ErrBusy) || try == 100 {
			return err
		}
		synctest.Wait()
	}
}

// start starts a node on the disk, its incarnation ids drawn from the run.
func (r *runner) start() {
	if r.cl != nil {
		r.n = r.startMember()
	} else {
		ms, err := runtime.OpenLocalMetastore(r.d, dataDir)
		r.must("open metastore", err)
		var key [32]byte
		binary.LittleEndian.PutUint64(key[:], r.rng.Uint64())
		ms.SetIncarnationSource(rand.NewChaCha8(key))
		r.feed = &feed{}
		ms.SetFeedDelivery(r.feed.deliver)
		n, err := runtime.New(r.nodeConfig(ms))
		r.must("new node", err)
		if err := n.Start(r.ctx); err != nil {
			n.Close()
			r.must("start node", err)
		}
		r.n = n
		r.live.ms = ms
	}
	r.pinLock()
	r.live.api = nil
	for _, t := range r.topics {
		if r.cl != nil && r.cl.meta.ownerOf(t.name, 0) != r.cl.cur.id {
			continue // another member's
		}
		for _, p := range t.parts {
			p.leases = map[int64]leaseModel{} // leases live in memory only
		}
	}
}

// nodeConfig is every node's configuration, on the runner's disk.
func (r *runner) nodeConfig(ms runtime.Metastore) runtime.Config {
	return runtime.Config{
		DataDir: dataDir, FS: r.d, Metastore: ms, SegmentMaxBytes: r.segBytes,
		ReaperInterval: reaperEvery, ColdWalkInterval: coldWalkEvery,
		IdleEvictAfter: idleEvictAfter, EvictInterval: evictEvery,
		QuarantineSweepInterval:      quarantineEvery,
		ConsumerOffsetCommitInterval: writeOutEvery, MaxOpenLogs: r.maxOpen,
		MinFreeBytes: floorBytes, MinFreeInodes: floorInodes,
		Testing: &runtime.TestOptions{Serial: true}, // exact replay (settle.go)
	}
}

// pick returns one of the run's topics, the calls that follow routed to
// the owner of its partition in a cluster run.
func (r *runner) pick() *topicModel {
	t := r.topics[r.rng.IntN(len(r.topics))]
	r.on(t)
	return t
}

// odd is d plus a few odd microseconds, so no wake of the workload lands
// on a background loop's tick.
func (r *runner) odd(d time.Duration) time.Duration {
	return d + time.Duration(1+r.rng.IntN(997))*time.Microsecond
}

// sleep advances the bubble's clock by d and lets every background loop
// due meanwhile run to its rest.
func (r *runner) sleep(d time.Duration) {
	time.Sleep(d)
	r.settle()
}

// describe returns a topic's partitions as the node sees them.
func (r *runner) describe(t *topicModel) []runtime.PartitionInfo {
	var infos []runtime.PartitionInfo
	err := retryBusy(func() (err error) {
		var rec runtime.TopicRecord
		rec, infos, err = r.n.Describe(r.ctx, t.name)
		if err == nil && (string(rec.Incarnation) != t.incarnation || rec.Partitions != len(t.parts) ||
			rec.RetentionMs != t.retMs || rec.RetentionBytes != t.retBytes) {
			r.failf("describe %s: record %+v, want incarnation %s, %d partitions, retention %d ms %d B",
				t.name, rec, t.incarnation, len(t.parts), t.retMs, t.retBytes)
		}
		return err
	})
	r.must("describe "+t.name, err)
	return infos
}
