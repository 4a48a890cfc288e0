package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
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
	TTL    time.Duration
	Logger *zap.Logger
}

// Assigner is one node's candidacy for assigning partitions. Every node
// runs one; the one etcd's election API makes leader gives each
// partition without an owner one: of the live members (members/), the one
// with the highest rendezvous score for the partition, so owners spread
// evenly and a partition's choice depends on nothing but its name and the
// members. An owner, once written, is kept: a node that dies keeps its
// partitions (there is no replication: only it holds their files) until
// it returns or an operator moves them. Every write is conditional on
// this node still holding the leadership and the topic record still being
// the incarnation it read, so a deposed leader or a deleted topic never
// gets an assignment written.
type Assigner struct {
	cfg    AssignerConfig
	keys   keys
	logger *zap.Logger
	stop   context.CancelFunc
	done   chan struct{}
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
	a := &Assigner{cfg: cfg, keys: newKeys(cfg.Prefix), logger: cfg.Logger, done: make(chan struct{})}
	if a.logger == nil {
		a.logger = zap.NewNop()
	}
	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	go a.run(ctx)
	return a, nil
}

// Stop ends the candidacy; a leader resigns, so another takes over now.
func (a *Assigner) Stop() {
	a.stop()
	<-a.done
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
		resign, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.TTL)
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
	for lead.Err() == nil {
		rev, err := a.assign(lead, leader, e.Key())
		if err != nil {
			return err
		}
		if err := a.waitForChange(lead, rev); err != nil {
			return err
		}
	}
	return lead.Err()
}

// waitForChange waits until anything under the prefix changes after
// revision rev. Each wait's watch is its own, cancelled after it (found
// by review: one left open a round). A progress notification is not a
// change: it reaches every watch on the client's stream, so a metastore
// sharing the client would otherwise wake the assigner every interval.
func (a *Assigner) waitForChange(ctx context.Context, rev int64) error {
	watch, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range a.cfg.Client.Watch(watch, a.keys.root, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		if !resp.IsProgressNotify() {
			return nil
		}
	}
	return ctx.Err()
}

// assign reads the topics, members and assignment, and gives every
// partition without an owner one; it returns the revision it read at.
func (a *Assigner) assign(ctx context.Context, leader clientv3.Cmp, leaderKey string) (int64, error) {
	resp, err := a.cfg.Client.Get(ctx, a.keys.root, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	type topicAt struct {
		rec    runtime.TopicRecord
		modRev int64
	}
	var topics []topicAt
	var members []string
	owned := map[partitionKey]bool{}
	for _, kv := range resp.Kvs {
		switch kind, name, p := a.keys.parse(string(kv.Key)); kind {
		case keyMember:
			var mi MemberInfo
			if json.Unmarshal(kv.Value, &mi) == nil && mi.ID == name {
				members = append(members, name)
			}
		case keyTopic:
			if rec, err := decodeTopic(name, kv.Value, kv.ModRevision); err == nil {
				topics = append(topics, topicAt{rec, kv.ModRevision})
			}
		case keyAssignment:
			owned[partitionKey{name, p}] = true
		}
	}
	if len(members) == 0 {
		return resp.Header.Revision, nil // nobody to assign to yet: a join wakes us
	}
	for _, t := range topics {
		var puts []clientv3.Op
		flush := func() error {
			if len(puts) == 0 {
				return nil
			}
			topicKey := a.keys.topic(t.rec.Name)
			r, err := a.cfg.Client.Txn(ctx).
				If(leader, clientv3.Compare(clientv3.ModRevision(topicKey), "=", t.modRev)).
				Then(puts...).
				Commit()
			puts = puts[:0]
			if err != nil {
				return fmt.Errorf("assign partitions of %s: %w", t.rec.Name, err)
			}
			if !r.Succeeded {
				// The topic changed (the next round reads it again), or this
				// node no longer leads: its candidacy's key is gone while
				// its lease lives on (deleted by hand), and it must step
				// down to campaign again.
				if got, err := a.cfg.Client.Get(ctx, leaderKey, clientv3.WithCountOnly()); err != nil {
					return err
				} else if got.Count == 0 {
					return errors.New("partition assigner: this node's candidacy is gone")
				}
			}
			return nil
		}
		for p := range t.rec.Partitions {
			if owned[partitionKey{t.rec.Name, p}] {
				continue
			}
			key := a.keys.assignment(t.rec.Name, p)
			puts = append(puts, clientv3.OpPut(key, rendezvous(t.rec.Name, p, members)))
			if len(puts) == maxOpsPerTxn {
				if err := flush(); err != nil {
					return 0, err
				}
			}
		}
		if err := flush(); err != nil {
			return 0, err
		}
	}
	return resp.Header.Revision, nil
}

// rendezvous is the member with the highest score for partition p of
// topic (highest random weight hashing): each member's score depends on
// the partition and the member only, so a member that joins takes about
// 1/n of the partitions and the rest keep their choice.
func rendezvous(topic string, p int, members []string) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		h := fnv.New64a()
		h.Write([]byte(topic))
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(p)))
		h.Write([]byte{0})
		h.Write([]byte(m))
		if s := mix64(h.Sum64()); best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

// mix64 is splitmix64's finalizer: FNV alone leaves inputs that differ in
// their last bytes (partition 1 and 2 of a topic) with close scores.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
