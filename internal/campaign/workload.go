package campaign

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"path"
	"strings"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// The reference workload (fault model, "The matrix"): one partition, 100
// commits of 1 to 4 KiB, 64 KiB segments (a roll every 25 commits or
// so), retention keeping the last few segments (about a second of fake
// time per commit, a 60 s bound, the reaper every 10 s), a consumer
// acking two commits behind (written out every second), the topic deleted
// and recreated at commit 25, a clean close and reopen at commit 50 (the
// codec switching from none to zstd there, so segments mix both) and a
// final close. Every record's bytes are a pure function of (seed,
// incarnation, offset), so any served byte can be checked.
const (
	Topic           = "ref"
	commits         = 100
	recreateAt      = 25
	reopenAt        = 50
	segmentMaxBytes = 64 << 10
	retention       = 60 * time.Second
	reaperEvery     = 10 * time.Second
	// commitEvery and drainGap are off the background loops' round
	// periods (100 ms, 1 s, 10 s), so no wake of the workload coincides
	// with a tick and the order of calls is the same in every run.
	commitEvery = 1003*time.Millisecond + 7*time.Microsecond
	drainGap    = 101*time.Millisecond + 3*time.Microsecond
)

// DataDir is where the workload's node keeps its data on the simulated disk.
const DataDir = "/data"

// Variant is one shape of the reference workload: one frame per commit
// (Produce), or four, three drained and written by the flusher in the
// background before the commit writes the last and syncs them all (the
// fault model's "four frames per fsync window").
type Variant struct {
	FramesPerCommit int // 1 or 4
}

// Variants are the shapes every campaign runs.
var Variants = []Variant{{FramesPerCommit: 1}, {FramesPerCommit: 4}}

func (v Variant) String() string { return fmt.Sprintf("%d frames per commit", v.FramesPerCommit) }

// Value is the record at offset of incarnation gen (1, then 2 after the
// recreate) of a seeded run: 256 B to 1 KiB derived from all three, so a
// record served at the wrong offset or from a deleted incarnation is
// caught.
func Value(seed uint64, gen int, offset int64) []byte {
	h := fnv.New64a()
	binary.Write(h, binary.BigEndian, seed)
	binary.Write(h, binary.BigEndian, int64(gen))
	binary.Write(h, binary.BigEndian, offset)
	sum := h.Sum64()
	out := make([]byte, 256+int(sum%769))
	fill := rand.NewPCG(sum, seed) // incompressible, so zstd frames are as large as plain ones
	for i := 0; i < len(out); i += 8 {
		var word [8]byte
		binary.LittleEndian.PutUint64(word[:], fill.Uint64())
		copy(out[i:], word[:])
	}
	copy(out, fmt.Sprintf("seed=%d gen=%d offset=%d ", seed, gen, offset))
	return out
}

// Gen is what the workload has promised about one incarnation of the
// topic (the fault model's three-valued oracle): offsets below Committed
// are set (a commit returned), [Committed, Written) are maybe (a commit in
// flight, or failed and not yet retried), the rest unset. Honest is
// Committed unless a sync of its records lied (Lied): offsets at or above
// it may then be lost.
type Gen struct {
	Incarnation wire.IncarnationID // "" until its create returned
	Deleting    bool               // its delete was called
	Deleted     bool               // its delete returned
	Committed   int64
	Written     int64
	Honest      int64
	Consumed    map[int64]bool // offsets whose ack returned
	// Lied: a sync that may hold this incarnation's records lied (a
	// segment's, the hwm file's, or a directory holding their entries);
	// Honest stays where it was from then on.
	Lied bool
}

// Model is what the workload has promised at one point: one Gen per
// incarnation created so far, the last being the one written to.
type Model struct {
	Gens []Gen
	// LiedMeta: a sync of a directory holding the metadata's entries lied;
	// the Lied* pairs: a sync of one of the two copies of the metastore's
	// file or of a marker lied. Once metaLost says so, the topic's record
	// and marker may be older than the workload saw, so which incarnation
	// is served, or whether the topic exists, is no longer promised.
	LiedMeta                         bool
	LiedMetastore, LiedMetastoreCopy bool
	LiedMarker, LiedMarkerCopy       bool
	// Phase is 0 before the reopen at commit 50, 1 after: it selects the
	// codec new frames use.
	Phase int
}

func (m Model) clone() Model {
	m.Gens = append([]Gen(nil), m.Gens...)
	for i := range m.Gens {
		m.Gens[i].Consumed = maps.Clone(m.Gens[i].Consumed)
	}
	return m
}

// metaLost reports whether lies may have lost the topic's record or its
// marker: a directory holding their entries, or both copies of one.
func (m Model) metaLost() bool {
	return m.LiedMeta || m.LiedMetastore && m.LiedMetastoreCopy || m.LiedMarker && m.LiedMarkerCopy
}

// lied reports whether any sync of the run lied.
func (m Model) lied() bool {
	if m.LiedMeta || m.LiedMetastore || m.LiedMetastoreCopy || m.LiedMarker || m.LiedMarkerCopy {
		return true
	}
	for _, g := range m.Gens {
		if g.Lied {
			return true
		}
	}
	return false
}

// current is the incarnation being written.
func (m *Model) current() *Gen { return &m.Gens[len(m.Gens)-1] }

// codecOf is the codec of a phase: none, then zstd after the reopen.
func codecOf(phase int) codec.ID {
	if phase == 0 {
		return codec.None
	}
	return codec.Zstd
}

// config is the workload's node config over d; the lock-order checker
// costs a stack walk per lock, so only the workload's own nodes run it.
func config(d *sim.Disk, c codec.ID, checkLockOrder bool) runtime.Config {
	cd, _ := codec.ByID(c)
	cfg := runtime.Config{
		DataDir: DataDir, FS: d, Codec: cd, SegmentMaxBytes: segmentMaxBytes,
		ReaperInterval: reaperEvery, IdleEvictAfter: 1000 * time.Hour,
		QuarantineSweepInterval: 1000 * time.Hour,
	}
	if checkLockOrder {
		cfg.Testing = &runtime.TestOptions{CheckLockOrder: true}
	}
	return cfg
}

// startNode starts a node on d with the workload's config. Its
// incarnation ids come from the seed and the metastore's file, so a run
// replays byte for byte and states dedupe across runs.
func startNode(ctx context.Context, d *sim.Disk, c codec.ID, checkLockOrder bool, seed uint64) (*runtime.Node, error) {
	ms, err := runtime.OpenLocalMetastore(d, DataDir)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	if b, err := d.Contents(path.Join(DataDir, "metastore.json")); err == nil {
		h.Write(b)
	}
	ms.SetIncarnationSource(rand.NewChaCha8(chachaSeed(seed, h.Sum64())))
	cfg := config(d, c, checkLockOrder)
	cfg.Metastore = ms
	n, err := runtime.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// A workload runs the reference workload on one disk, keeping its model
// current under lock (the explorer snapshots it from the disk's hook).
// With retry set, a failed step is retried as a broker would: a poisoned
// log, a broken metastore or a failed start by restarting the node,
// anything else by doing the step again (a failed commit with the same
// records, which must land at the same offsets).
type workload struct {
	ctx   context.Context
	d     *sim.Disk
	v     Variant
	seed  uint64
	m     *Model
	lock  func(func())
	n     *runtime.Node
	retry bool
	// lockOrder are the lock-order checker's findings on every node the
	// run started: any fails the run.
	lockOrder []string
}

// errLockOrder: a node of the run took locks out of the design's order.
var errLockOrder = errors.New("lock-order violations")

// maxAttempts bounds the retries of one step: one injected fault may fail
// a step, and a restart after it, but never more.
const maxAttempts = 4

// Options shape one run of the workload.
type Options struct {
	// Retry retries failed steps as a broker would (the workload type
	// says how); without it Run returns at the first error, which is then
	// a bug of the engine: nothing was injected.
	Retry bool
	// Stop, when set, is asked before each commit; true ends the run
	// there with a clean close.
	Stop func() bool
}

// Run runs the reference workload on d, keeping m current; it must run in
// a synctest bubble (it sleeps on the fake clock).
func Run(ctx context.Context, d *sim.Disk, v Variant, seed uint64, m *Model, lock func(func()), opts Options) (err error) {
	retry := opts.Retry
	w := &workload{ctx: ctx, d: d, v: v, seed: seed, m: m, lock: lock, retry: retry}
	defer func() {
		if w.n != nil {
			if cerr := w.close(); err == nil && !retry {
				err = cerr
			}
		}
		if len(w.lockOrder) > 0 {
			// Never hidden behind another error a caller may expect.
			err = errors.Join(err, fmt.Errorf("%w: %v", errLockOrder, w.lockOrder))
		}
	}()
	if err := w.step("start", w.start); err != nil {
		return err
	}
	if err := w.create(); err != nil {
		return err
	}
	rng := fnv.New64a()
	binary.Write(rng, binary.BigEndian, seed)
	var boundaries []int64 // the end offset of every commit of the current incarnation
	for i := range commits {
		if opts.Stop != nil && opts.Stop() {
			break
		}
		switch i {
		case recreateAt:
			if err := w.recreate(); err != nil {
				return err
			}
			boundaries = nil
		case reopenAt:
			if err := w.close(); err != nil && !retry {
				return fmt.Errorf("close at commit %d: %w", i, err)
			}
			w.n = nil
			w.lock(func() { w.m.Phase = 1 })
			if err := w.step("reopen", w.start); err != nil {
				return err
			}
		}
		rng.Write([]byte{byte(i)})
		count := 2 + int(rng.Sum64()%5) // 2 to 6 records of 256 B to 1 KiB
		if v.FramesPerCommit == 4 {
			count = 4 + int(rng.Sum64()%3) // a frame of 1 or 2 records each
		}
		if err := w.commit(i, count); err != nil {
			return err
		}
		boundaries = append(boundaries, w.m.current().Committed)
		if len(boundaries) > 2 {
			from := int64(0)
			if len(boundaries) > 3 {
				from = boundaries[len(boundaries)-4]
			}
			if err := w.ack(from, boundaries[len(boundaries)-3]); err != nil {
				return err
			}
		}
		time.Sleep(commitEvery) // fake time: consumer write-outs, the reaper, segment ages
	}
	err = w.close()
	if retry {
		return nil
	}
	return err
}

// step runs f, retrying as a broker would when retry is set.
func (w *workload) step(what string, f func() error) error {
	var err error
	for range maxAttempts {
		if err = f(); err == nil || !w.retry {
			break
		}
		if w.n == nil || errors.Is(err, partition.ErrLogPoisoned) || errors.Is(err, runtime.ErrNodeClosed) ||
			errors.Is(err, runtime.ErrMetastoreBroken) {
			w.restart()
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// start starts a node on the disk in the current phase's codec.
func (w *workload) start() error {
	var phase int
	w.lock(func() { phase = w.m.Phase })
	n, err := startNode(w.ctx, w.d, codecOf(phase), true, w.seed)
	if err != nil {
		return err
	}
	w.n = n
	return nil
}

// restart closes the node (a failure to close is what a crashing process
// has too) and leaves the next attempt to start a new one.
func (w *workload) restart() {
	if w.n != nil {
		w.close()
	}
}

// close closes the node, keeping the lock-order checker's findings.
func (w *workload) close() error {
	err := w.n.Close()
	w.lockOrder = append(w.lockOrder, w.n.LockOrderViolations()...)
	w.n = nil
	return err
}

// ensure starts a node if a restart left none.
func (w *workload) ensure() error {
	if w.n != nil {
		return nil
	}
	return w.start()
}

// create creates the topic's next incarnation.
func (w *workload) create() error {
	w.lock(func() { w.m.Gens = append(w.m.Gens, Gen{Consumed: map[int64]bool{}}) })
	return w.step("create", func() error {
		if err := w.ensure(); err != nil {
			return err
		}
		rec, _, err := w.n.CreateTopic(w.ctx, Topic, 1, runtime.Retention{Ms: retention.Milliseconds()})
		if err == nil {
			w.lock(func() { w.m.current().Incarnation = rec.Incarnation })
		}
		return err
	})
}

// recreate deletes the topic and creates it again: a new incarnation.
func (w *workload) recreate() error {
	w.lock(func() { w.m.current().Deleting = true })
	err := w.step("delete", func() error {
		if err := w.ensure(); err != nil {
			return err
		}
		err := w.n.DeleteTopic(w.ctx, Topic)
		if errors.Is(err, runtime.ErrTopicNotFound) && w.retry {
			return nil // an earlier attempt deleted the record and failed after
		}
		return err
	})
	if err != nil {
		return err
	}
	w.lock(func() { w.m.current().Deleted = true })
	return w.create()
}

// commit commits count records at the current incarnation's next offset.
func (w *workload) commit(i, count int) error {
	var gen int
	var base int64
	w.lock(func() {
		gen, base = len(w.m.Gens), w.m.current().Written
		w.m.current().Written = base + int64(count)
	})
	records := make([]partition.Record, count)
	for j := range records {
		records[j] = partition.Record{Value: Value(w.seed, gen, base+int64(j))}
	}
	err := w.step(fmt.Sprintf("commit %d", i), func() error {
		if err := w.ensure(); err != nil {
			return err
		}
		got, err := w.produce(records)
		if err == nil && got != base {
			return fmt.Errorf("landed at %d, want %d (I6)", got, base)
		}
		return err
	})
	if err != nil {
		return err
	}
	w.lock(func() {
		g := w.m.current()
		g.Committed = g.Written
		if !g.Lied {
			g.Honest = g.Committed
		}
	})
	return nil
}

// produce commits records as the variant does: one Produce, or appends
// the flusher drains into frames of their own before the commit.
func (w *workload) produce(records []partition.Record) (int64, error) {
	if w.v.FramesPerCommit == 1 {
		return w.n.Produce(w.ctx, Topic, 0, records)
	}
	l, err := w.n.Log(w.ctx, Topic, 0)
	if err != nil {
		return 0, err
	}
	var base int64
	per := (len(records) + w.v.FramesPerCommit - 1) / w.v.FramesPerCommit
	for j := 0; j < len(records); j += per {
		b, err := l.Append(w.ctx, records[j:min(j+per, len(records))])
		if err != nil {
			return 0, err
		}
		if j == 0 {
			base = b
		}
		if j+per < len(records) {
			time.Sleep(drainGap) // the flusher drains and writes what is buffered
		}
	}
	return base, l.CommitDurable(w.ctx)
}

// ack acks [from, to) of the current incarnation.
func (w *workload) ack(from, to int64) error {
	var acks []int64
	for o := from; o < to; o++ {
		acks = append(acks, o)
	}
	err := w.step("ack", func() error {
		if err := w.ensure(); err != nil {
			return err
		}
		_, err := w.n.Ack(w.ctx, Topic, 0, acks...)
		return err
	})
	if err != nil {
		return err
	}
	w.lock(func() {
		for _, o := range acks {
			w.m.current().Consumed[o] = true
		}
	})
	return nil
}

// chachaSeed is a ChaCha8 seed made of two numbers.
func chachaSeed(a, b uint64) (out [32]byte) {
	binary.LittleEndian.PutUint64(out[:], a)
	binary.LittleEndian.PutUint64(out[8:], b)
	return out
}

// noteLie records in m what a lying sync of c may cost: the records of
// the incarnation being written (a file or directory under the topic's
// directory, or a directory holding its entry), the metadata (a directory
// holding its entries, or both copies of the metastore's file or of a
// marker: one is covered by the other), or nothing (the consumer's files: a lost write-out only steps the
// frontier back, which is allowed anyway).
func (m *Model) noteLie(c sim.Call) {
	topics := path.Join(DataDir, wire.TopicsDirName)
	topicDir := path.Join(topics, Topic)
	base := path.Base(c.Path)
	holdsEntries := c.Op == sim.OpSyncDir && (c.Path == DataDir || c.Path == topics || c.Path == topicDir)
	switch {
	case strings.HasPrefix(base, "consumer."):
	case strings.HasPrefix(base, "metastore.json.copy"):
		m.LiedMetastoreCopy = true
	case strings.HasPrefix(base, "metastore.json"):
		m.LiedMetastore = true
	case strings.HasPrefix(base, wire.IncarnationCopyFileName):
		m.LiedMarkerCopy = true
	case strings.HasPrefix(base, wire.IncarnationFileName):
		m.LiedMarker = true
	case holdsEntries || strings.HasPrefix(c.Path, topicDir+"/"):
		m.LiedMeta = m.LiedMeta || holdsEntries
		if len(m.Gens) > 0 {
			m.current().Lied = true
		}
	}
}
