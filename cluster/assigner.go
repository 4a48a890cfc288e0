package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/narad-io/storage/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// AssignerConfig configures an Assigner.
type AssignerConfig struct {
	Client *clientv3.Client
	Prefix string // as Config.Prefix
	NodeID string // this node's id, its candidacy's value
	// TTL is the election lease's time to live: a leader that dies is
	// replaced this long after. 10 s when zero.
	TTL time.Duration
	// FenceAfter is the fence horizon the assigner waits out, after it saw
	// a node marked lost absent, before it gives the node's partitions
	// away, unless the node registered a longer one (lost.go).
	// DefaultFenceAfter when zero.
	FenceAfter time.Duration
	Logger     *zap.Logger
}

// Assigner is one node's candidacy for assigning partitions. Every node
// runs one; the one etcd's election API makes leader gives each
// partition without an owner the one the placement gives it (Place, over
// the live members not draining: each topic, and each member's total,
// within one of an even share, moving the fewest partitions that
// balance allows). An owner is never overwritten: a partition changes
// owner only by a move (moves.go), which its new owner pulls from the
// live old one. When the eligible members change (a join, a return, a
// drain) the leader asks each partition whose live owner is not the one
// the placement gives it to move there (rebalance); a node that dies keeps its
// partitions (there is no replication: only it holds their files) until
// it returns, an operator moves them, or an operator marks it lost
// (lost.go: its partitions then go to live nodes, empty, once its fence
// horizon has passed). Every write is conditional on this node still
// holding the leadership and on what it read (the topic record's
// incarnation, the owner), so a deposed leader or a deleted topic never
// gets an assignment or a move written.
type Assigner struct {
	cfg    AssignerConfig
	keys   keys
	logger *zap.Logger
	stop   context.CancelFunc
	done   chan struct{}
	// resigns bounds a leader's resignation, which outlives the
	// candidacy's context; halt ends it when a Stop's context ends.
	resigns context.Context
	halt    context.CancelFunc

	// The leader's own observations, reset each term (the run goroutine's
	// only): when it first saw each lost mark (a node cannot register
	// while its mark is there, so it has been absent since).
	markSeen map[lostMark]time.Time
}

// maxOpsPerTxn stays under etcd's default limit of 128 operations in one
// transaction.
const maxOpsPerTxn = 100

// StartAssigner starts the node's candidacy; Stop ends it.
func StartAssigner(cfg AssignerConfig) (*Assigner, error) {
	if cfg.Client == nil || cfg.NodeID == "" {
		return nil, errors.New("cluster: an assigner needs a client and a node id")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.FenceAfter <= 0 {
		cfg.FenceAfter = DefaultFenceAfter
	}
	a := &Assigner{cfg: cfg, keys: newKeys(cfg.Prefix), logger: cfg.Logger, done: make(chan struct{})}
	if a.logger == nil {
		a.logger = zap.NewNop()
	}
	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	a.resigns, a.halt = context.WithCancel(context.Background())
	go a.run(ctx)
	return a, nil
}

// Stop ends the candidacy, waiting for its end until ctx ends or the
// TTL passes at most (by then its lease has run out: nothing is left to
// withdraw): a leader resigns, so another takes over now. A candidate
// that does not lead withdraws through etcd's election API, whose cleanup
// of a cancelled campaign waits on the client's own context, without a
// deadline (found in a trial: with etcd unreachable, a stopping node
// waited there until etcd came back). So a Stop cut short returns an
// error, and such a candidacy ends once the client is closed: a Stop
// then returns at once.
func (a *Assigner) Stop(ctx context.Context) error {
	a.stop()
	defer a.halt() // a resignation still under way ends with the wait
	ctx, cancel := context.WithTimeout(ctx, a.cfg.TTL)
	defer cancel()
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("partition assigner: stopping: %w", ctx.Err())
	}
}

// run campaigns, leads until its lease is lost, and campaigns again.
func (a *Assigner) run(ctx context.Context) {
	defer close(a.done)
	for ctx.Err() == nil {
		if err := a.campaignAndLead(ctx); err != nil && ctx.Err() == nil {
			a.logger.Warn("partition assigner: leadership ended; campaigning again", zap.Error(err))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (a *Assigner) campaignAndLead(ctx context.Context) error {
	s, err := concurrency.NewSession(a.cfg.Client, concurrency.WithTTL(max(1, int(a.cfg.TTL/time.Second))), concurrency.WithContext(ctx))
	if err != nil {
		return err
	}
	defer s.Close()
	e := concurrency.NewElection(s, a.keys.election())
	if err := e.Campaign(ctx, a.cfg.NodeID); err != nil {
		return err
	}
	defer func() {
		resign, cancel := context.WithTimeout(a.resigns, a.cfg.TTL)
		defer cancel()
		_ = e.Resign(resign)
	}()
	a.logger.Info("partition assigner: leading", zap.String("node", a.cfg.NodeID))
	leader := clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())
	lead, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.Done(): // the lease is gone: so is the leadership
			cancel()
		case <-lead.Done():
		}
	}()
	a.markSeen = map[lostMark]time.Time{}
	for lead.Err() == nil {
		rev, again, err := a.assign(lead, leader, e.Key())
		if err != nil {
			return err
		}
		if err := a.waitForChange(lead, rev, again); err != nil {
			return err
		}
	}
	return lead.Err()
}

// waitForChange waits until anything under the prefix changes after
// revision rev, or until again (when not zero: a lost node's fence
// horizon ends). Each wait's watch is its own, cancelled after it (found
// by review: one left open a round). A progress notification is not a
// change: it reaches every watch on the client's stream, so a metastore
// sharing the client would otherwise wake the assigner every interval.
func (a *Assigner) waitForChange(ctx context.Context, rev int64, again time.Time) error {
	watch, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	if !again.IsZero() {
		timer := time.AfterFunc(time.Until(again), cancel)
		defer timer.Stop()
	}
	for resp := range a.cfg.Client.Watch(watch, a.keys.root, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			if ctx.Err() == nil && watch.Err() != nil {
				return nil // the horizon ended: another round
			}
			return err
		}
		if !resp.IsProgressNotify() {
			return nil
		}
	}
	return ctx.Err()
}

// assign reads the topics, members and assignment, makes the round's
// placement (Place, over the eligible members: a draining member is not
// eligible while another is), gives every partition without an owner the
// one the placement gives it, gives a lost node's partitions to theirs
// once its fence horizon has passed (reassignLost), and rebalances when
// the eligible members changed since the last rebalance. It returns the
// revision it read at, and when to look again without a change (zero:
// never).
func (a *Assigner) assign(ctx context.Context, leader clientv3.Cmp, leaderKey string) (int64, time.Time, error) {
	resp, err := a.cfg.Client.Get(ctx, a.keys.root, clientv3.WithPrefix())
	if err != nil {
		return 0, time.Time{}, err
	}
	var st clusterState
	st.owners, st.moves, st.live, st.draining = map[partitionKey]string{}, map[partitionKey]Move{}, map[string]bool{}, map[string]bool{}
	st.lost, st.fence = map[string]int64{}, map[string]time.Duration{}
	for _, kv := range resp.Kvs {
		switch kind, name, p := a.keys.parse(string(kv.Key)); kind {
		case keyMember:
			var mi MemberInfo
			if json.Unmarshal(kv.Value, &mi) == nil && mi.ID == name {
				st.live[name] = true
			}
		case keyTopic:
			if rec, err := decodeTopic(name, kv.Value, kv.ModRevision); err == nil {
				st.topics = append(st.topics, topicAt{rec, kv.ModRevision})
			}
		case keyAssignment:
			st.owners[partitionKey{name, p}] = string(kv.Value)
		case keyMove:
			var mv Move
			if json.Unmarshal(kv.Value, &mv) == nil {
				mv.Rev = kv.ModRevision
				st.moves[partitionKey{name, p}] = mv
			}
		case keyDrain:
			st.draining[name] = true
		case keyLost:
			st.lost[name] = kv.ModRevision
		case keyFence:
			if ms, err := strconv.ParseInt(string(kv.Value), 10, 64); err == nil && ms > 0 {
				st.fence[name] = time.Duration(ms) * time.Millisecond
			}
		default:
			if string(kv.Key) == a.keys.rebalanced() {
				st.rebalanced = string(kv.Value)
			}
		}
	}
	for m := range a.markSeen {
		if st.lost[m.id] != m.rev {
			delete(a.markSeen, m) // cleared, or marked again: a mark of its own
		}
	}
	eligible := st.eligible()
	if len(eligible) == 0 {
		return resp.Header.Revision, time.Time{}, nil // nobody to assign to yet: a join wakes us
	}
	txn := a.txns(ctx, leader, leaderKey)
	if err := a.cancelStranded(ctx, txn, st); err != nil {
		return 0, time.Time{}, err
	}
	due, again := a.dueLost(st, time.Now())
	st.plan = &roundPlan{place: func() map[Partition]string {
		parts, current := st.placeable(due)
		return Place(parts, eligible, current)
	}}
	for _, t := range st.topics {
		topicCmp := clientv3.Compare(clientv3.ModRevision(a.keys.topic(t.rec.Name)), "=", t.modRev)
		for p := range t.rec.Partitions {
			if _, owned := st.owners[partitionKey{t.rec.Name, p}]; owned {
				continue
			}
			key := a.keys.assignment(t.rec.Name, p)
			if err := txn.add([]clientv3.Cmp{topicCmp}, clientv3.OpPut(key, st.plan.owner(t.rec.Name, p))); err != nil {
				return 0, time.Time{}, err
			}
		}
		if err := txn.flush(); err != nil { // one topic's assignments at a time: its compare is its own
			return 0, time.Time{}, err
		}
	}
	if err := a.reassignLost(txn, st, due); err != nil {
		return 0, time.Time{}, err
	}
	if err := a.rebalance(ctx, txn, st, eligible); err != nil {
		return 0, time.Time{}, err
	}
	return resp.Header.Revision, again, nil
}

// topicAt is a topic record and its key's mod revision.
type topicAt struct {
	rec    runtime.TopicRecord
	modRev int64
}

// clusterState is what one round of the assigner read.
type clusterState struct {
	topics     []topicAt
	owners     map[partitionKey]string
	moves      map[partitionKey]Move
	live       map[string]bool
	draining   map[string]bool
	lost       map[string]int64         // the nodes marked lost, and their marks' mod revisions
	fence      map[string]time.Duration // each node's fence horizon, as its last registration wrote it
	rebalanced string                   // the eligible members the last rebalance was for
	plan       *roundPlan               // the round's placement (placement.go)
}

// roundPlan is a round's placement, made when first asked: a round with
// nothing to place (a move's progress, a deletion) never makes one.
type roundPlan struct {
	place func() map[Partition]string
	plan  map[Partition]string
}

// owner is the owner the placement gives partition p of topic ("": none,
// the partition is not placed this round).
func (r *roundPlan) owner(topic string, p int) string {
	if r.plan == nil {
		r.plan = r.place()
	}
	return r.plan[Partition{topic, p}]
}

// eligible lists the members that get partitions: the live ones not
// draining, or every live one if all are draining (a partition needs an
// owner), sorted.
func (st clusterState) eligible() []string {
	var all, out []string
	for id := range st.live {
		all = append(all, id)
		if !st.draining[id] {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		out = all
	}
	sort.Strings(out)
	return out
}

// placeable is what Place places this round: every partition but those
// of a node down (not live) and not due to be given away (dueLost), which
// stay its own (only its disk holds them) and count in nobody's share;
// and where each is now: its owner, or the new owner of a move under way
// (the move decides its owner).
func (st clusterState) placeable(due map[string]bool) ([]Partition, map[Partition]string) {
	var parts []Partition
	current := map[Partition]string{}
	for _, t := range st.topics {
		for p := range t.rec.Partitions {
			k := partitionKey{t.rec.Name, p}
			owner, owned := st.owners[k]
			now := owner
			if mv, moving := st.moves[k]; moving {
				now = mv.To
			}
			if owned && !due[owner] && !st.live[now] && !due[now] {
				continue
			}
			parts = append(parts, Partition{t.rec.Name, p})
			if owned {
				current[Partition{t.rec.Name, p}] = now
			}
		}
	}
	return parts, current
}

// cancelStranded cancels the requested moves whose new owner is not live
// or is draining: nobody would pull them, and they would keep their
// partitions from a move the next rebalance plans. A cancelled move leaves
// st.moves, so this round's rebalance plans its partition (if the cancel
// was refused, so is that plan, and the round records no rebalance). A
// frozen move is left to its old owner, which cancels it once frozen too
// long.
func (a *Assigner) cancelStranded(ctx context.Context, txn *txnBatch, st clusterState) error {
	for k, mv := range st.moves {
		if mv.State == MoveRequested && (!st.live[mv.To] || st.draining[mv.To]) {
			key := a.keys.move(k.topic, k.partition)
			if err := txn.add([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", mv.Rev)}, clientv3.OpDelete(key)); err != nil {
				return err
			}
			delete(st.moves, k)
			a.logger.Info("partition assigner: a move's new owner is gone or draining; cancelled", zap.String("move", mv.ID),
				zap.String("topic", mv.Topic), zap.Int("partition", mv.Partition), zap.String("to", mv.To))
		}
	}
	return txn.flush()
}

// lostMark is one mark of a node lost: its id and the mark's mod revision.
type lostMark struct {
	id  string
	rev int64
}

// dueLost lists the nodes marked lost, and not live, whose partitions go
// to live members: once this leader has seen the mark (so the node
// absent) for the node's fence horizon (fence/<id>, which its last
// registration wrote; a node with none keeps its partitions) (the node
// stopped serving by then: lost.go). It returns when to look again for a
// node still inside its horizon.
func (a *Assigner) dueLost(st clusterState, now time.Time) (map[string]bool, time.Time) {
	var again time.Time
	due := map[string]bool{}
	for id := range st.lost {
		if st.live[id] {
			continue
		}
		horizon, known := st.fence[id]
		mark := lostMark{id, st.lost[id]}
		since, seen := a.markSeen[mark]
		if !seen {
			since = now
			a.markSeen[mark] = now
			if known {
				a.logger.Warn("partition assigner: a node marked lost; its partitions go to live nodes once its fence horizon has passed",
					zap.String("lost", id), zap.Duration("horizon", max(a.cfg.FenceAfter, horizon)))
			} else {
				a.logger.Error("partition assigner: a node marked lost never registered a fence horizon; its partitions stay its own",
					zap.String("lost", id))
			}
		}
		if !known {
			continue // nothing says when it stops serving
		}
		end := since.Add(max(a.cfg.FenceAfter, horizon))
		if now.Before(end) {
			if again.IsZero() || end.Before(again) {
				again = end
			}
			continue
		}
		due[id] = true
	}
	return due, again
}

// reassignLost gives each partition of a due lost node (dueLost) the
// owner the round's placement gives it. Each write is conditional on the
// topic record, on the partition still being the lost node's, and on the
// mark being the one read (a node that cleared its mark after setting its
// copies aside keeps what it still owns); a move of the partition under
// way goes in the same transaction (its old or new owner is the lost
// node: neither can finish it). The round's state follows. The first
// write also clears the record of the last rebalance: the placement may
// move partitions between the live members too, to keep each one's total
// within its share, and the next round's rebalance asks for those moves.
func (a *Assigner) reassignLost(txn *txnBatch, st clusterState, due map[string]bool) error {
	if len(due) == 0 {
		return nil
	}
	moved := map[string]int{}
	for _, t := range st.topics {
		topicCmp := clientv3.Compare(clientv3.ModRevision(a.keys.topic(t.rec.Name)), "=", t.modRev)
		for p := range t.rec.Partitions {
			k := partitionKey{t.rec.Name, p}
			owner := st.owners[k]
			if !due[owner] {
				continue
			}
			target := st.plan.owner(t.rec.Name, p)
			if target == "" {
				continue // cannot happen: placeable places a due node's partitions
			}
			if len(moved) == 0 {
				if err := txn.add(nil, clientv3.OpPut(a.keys.rebalanced(), "")); err != nil {
					return err
				}
			}
			assign := a.keys.assignment(t.rec.Name, p)
			cmps := []clientv3.Cmp{
				topicCmp,
				clientv3.Compare(clientv3.Value(assign), "=", owner),
				clientv3.Compare(clientv3.ModRevision(a.keys.lost(owner)), "=", st.lost[owner]),
			}
			ops := []clientv3.Op{clientv3.OpPut(assign, target)}
			if mv, moving := st.moves[k]; moving {
				key := a.keys.move(t.rec.Name, p)
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", mv.Rev))
				ops = append(ops, clientv3.OpDelete(key))
				delete(st.moves, k)
			}
			if err := txn.add(cmps, ops...); err != nil {
				return err
			}
			st.owners[k] = target
			moved[owner]++
		}
		if err := txn.flush(); err != nil {
			return err
		}
	}
	for id, n := range moved {
		a.logger.Warn("partition assigner: gave a lost node's partitions to live nodes, empty (their records were on its disk only)",
			zap.String("lost", id), zap.Int("partitions", n))
	}
	return nil
}

// rebalance moves partitions to the owners the round's placement gives
// them. When the eligible members differ from those of the last
// rebalance (a member joined, left, came back, or was drained or
// undrained; or a lost node's partitions were given away, which clears
// the record), every partition whose owner is live, has no move under
// way, and is not the member the placement gives it is asked to move
// there: a join thus moves the new member its share, and only what the
// per-member balance needs besides (Place). A partition a draining member owns is asked off it in
// every round, whatever the members (it may have come back, or a move
// may have landed on it meanwhile). A member that left keeps its
// partitions (only its disk holds them), and a partition with a move
// under way keeps the owner that move gives it. The members rebalanced
// for are recorded once every request was written (a refused one plans
// again next round); between membership changes nothing else moves, so
// an operator's move stays.
func (a *Assigner) rebalance(ctx context.Context, txn *txnBatch, st clusterState, eligible []string) error {
	members := strings.Join(eligible, ",")
	changed := members != st.rebalanced
	planned := 0
	for _, t := range st.topics {
		topicCmp := clientv3.Compare(clientv3.ModRevision(a.keys.topic(t.rec.Name)), "=", t.modRev)
		for p := range t.rec.Partitions {
			k := partitionKey{t.rec.Name, p}
			owner, owned := st.owners[k]
			if !owned || !st.live[owner] || (!changed && !st.draining[owner]) {
				continue
			}
			if _, moving := st.moves[k]; moving {
				continue // the move under way decides its owner (and a round of moves under way places nothing)
			}
			target := st.plan.owner(t.rec.Name, p)
			if target == "" || target == owner || st.draining[target] {
				continue // every live member draining: nowhere better to go (a move there would be cancelled as stranded, and planned again)
			}
			var r [8]byte
			rand.Read(r[:])
			mv := Move{ID: hex.EncodeToString(r[:]), Topic: t.rec.Name, Partition: p, From: owner, To: target, Incarnation: t.rec.Incarnation, State: MoveRequested}
			val, err := mv.encode()
			if err != nil {
				return err
			}
			key, assign := a.keys.move(t.rec.Name, p), a.keys.assignment(t.rec.Name, p)
			cmps := []clientv3.Cmp{
				topicCmp,
				clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
				clientv3.Compare(clientv3.Value(assign), "=", owner),
			}
			if err := txn.add(cmps, clientv3.OpPut(key, val)); err != nil {
				return err
			}
			planned++
		}
	}
	if err := txn.flush(); err != nil {
		return err
	}
	if !changed || txn.refused {
		return nil // nothing to record, or something to plan again next round
	}
	if err := txn.add(nil, clientv3.OpPut(a.keys.rebalanced(), members)); err != nil {
		return err
	}
	if err := txn.flush(); err != nil {
		return err
	}
	a.logger.Info("partition assigner: rebalanced", zap.Strings("members", eligible), zap.Int("moves", planned))
	return nil
}

// txnBatch writes operations in transactions of at most maxOpsPerTxn
// operations (and as many compares), each conditional on this node still
// leading and on its operations' own compares. refused says a
// transaction's compares failed (something changed: the next round reads
// it again).
type txnBatch struct {
	a         *Assigner
	ctx       context.Context
	leader    clientv3.Cmp
	leaderKey string
	cmps      []clientv3.Cmp
	ops       []clientv3.Op
	refused   bool
}

func (a *Assigner) txns(ctx context.Context, leader clientv3.Cmp, leaderKey string) *txnBatch {
	return &txnBatch{a: a, ctx: ctx, leader: leader, leaderKey: leaderKey}
}

// add queues op under cmps, writing the batch once it is full.
func (b *txnBatch) add(cmps []clientv3.Cmp, ops ...clientv3.Op) error {
	b.cmps = append(b.cmps, cmps...)
	b.ops = append(b.ops, ops...)
	if len(b.ops) >= maxOpsPerTxn/2 || len(b.cmps) >= maxOpsPerTxn {
		return b.flush()
	}
	return nil
}

// flush writes what is queued.
func (b *txnBatch) flush() error {
	if len(b.ops) == 0 {
		return nil
	}
	r, err := b.a.cfg.Client.Txn(b.ctx).If(append([]clientv3.Cmp{b.leader}, b.cmps...)...).Then(b.ops...).Commit()
	b.cmps, b.ops = b.cmps[:0], b.ops[:0]
	if err != nil {
		return fmt.Errorf("partition assigner: %w", err)
	}
	if !r.Succeeded {
		b.refused = true
		// Something changed (the next round reads it again), or this node
		// no longer leads: its candidacy's key is gone while its lease
		// lives on (deleted by hand), and it must step down to campaign
		// again.
		if got, err := b.a.cfg.Client.Get(b.ctx, b.leaderKey, clientv3.WithCountOnly()); err != nil {
			return err
		} else if got.Count == 0 {
			return errors.New("partition assigner: this node's candidacy is gone")
		}
	}
	return nil
}
