package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config configures an EtcdMetastore.
type Config struct {
	// Client is the etcd client; the caller owns it and closes it after
	// the metastore.
	Client *clientv3.Client
	// Prefix is the key prefix of the cluster's records ("/narad/" when
	// empty); several clusters may share one etcd under different ones.
	Prefix string
	// NodeID is this node's id: Assigned reports the partitions assigned
	// to it.
	NodeID string
	// ProgressInterval is how often the metastore checks that its replica
	// is caught up (CaughtUp); 1 s when zero.
	ProgressInterval time.Duration
	// Logger gets the watch's restarts; zap.NewNop() when nil.
	Logger *zap.Logger
	// IncarnationSource is where incarnation ids come from; crypto/rand
	// when nil. Tests set it.
	IncarnationSource io.Reader
}

// EtcdMetastore is runtime.Metastore on etcd. The topic records and the
// assignment live in etcd (see the package doc for the keys); a replica
// of them in memory, fed by one watch of the prefix from the revision the
// first read saw, serves Topic, Topics, Assigned and Subscribe without a
// round trip. A change returns once the replica holds it, so a node reads
// its own writes. CaughtUp is true while the replica has applied, within
// one progress interval, everything etcd held an interval before;
// IncarnationGone asks etcd, linearizably. A lost watch (a compaction, a
// leader lost, etcd down) is followed by a fresh read of the prefix and a
// new watch; the replica keeps serving what it holds meanwhile, and
// CaughtUp says it may be stale.
//
// Invariants, under mu: topics, owners, members, moves, drains and lost are what etcd held
// under the prefix at revision applied; applied never decreases; advanced
// is closed and replaced whenever applied moves.
type EtcdMetastore struct {
	cli      *clientv3.Client
	keys     keys
	nodeID   string
	interval time.Duration
	logger   *zap.Logger
	ids      io.Reader

	mu       sync.Mutex
	topics   map[string]runtime.TopicRecord
	owners   map[partitionKey]string
	members  map[string]MemberInfo
	moves    map[partitionKey]Move
	drains   map[string]bool
	lost     map[string]bool // the nodes marked lost (lost.go)
	applied  int64
	advanced chan struct{}
	subs     map[int]func(string)
	nextSub  int

	caughtUp  atomic.Bool
	cuMu      sync.Mutex
	cuChanged chan struct{} // closed and replaced when caughtUp changes; under cuMu

	stop   context.CancelFunc
	closed chan struct{} // closed by Close: no change waits for the replica after it
	done   sync.WaitGroup
}

var (
	_ runtime.Metastore           = (*EtcdMetastore)(nil)
	_ runtime.RefusedTopicDeleter = (*EtcdMetastore)(nil)
)

// partitionKey names one partition of a topic.
type partitionKey struct {
	topic     string
	partition int
}

// OpenEtcdMetastore reads the cluster's records from etcd and starts
// following them. Close stops it.
func OpenEtcdMetastore(ctx context.Context, cfg Config) (*EtcdMetastore, error) {
	if cfg.Client == nil {
		return nil, errors.New("cluster: no etcd client")
	}
	if cfg.NodeID == "" {
		return nil, errors.New("cluster: no node id")
	}
	m := &EtcdMetastore{
		cli:       cfg.Client,
		keys:      newKeys(cfg.Prefix),
		nodeID:    cfg.NodeID,
		interval:  cfg.ProgressInterval,
		logger:    cfg.Logger,
		ids:       cfg.IncarnationSource,
		advanced:  make(chan struct{}),
		subs:      map[int]func(string){},
		cuChanged: make(chan struct{}),
		closed:    make(chan struct{}),
	}
	if m.interval <= 0 {
		m.interval = time.Second
	}
	if m.logger == nil {
		m.logger = zap.NewNop()
	}
	if m.ids == nil {
		m.ids = rand.Reader
	}
	if err := m.reload(ctx); err != nil {
		return nil, err
	}
	loops, stop := context.WithCancel(context.Background())
	m.stop = stop
	m.done.Add(2)
	go m.follow(loops)
	go m.checkProgress(loops)
	return m, nil
}

// Close stops following etcd; the replica keeps answering what it held.
func (m *EtcdMetastore) Close() error {
	select {
	case <-m.closed:
		return nil
	default:
		close(m.closed)
	}
	m.stop()
	m.done.Wait()
	m.setCaughtUp(false)
	return nil
}

// Topic implements runtime.Metastore, from the replica.
func (m *EtcdMetastore) Topic(_ context.Context, name string) (runtime.TopicRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.topics[name]
	return rec, ok, nil
}

// Topics implements runtime.Metastore, from the replica, by name.
func (m *EtcdMetastore) Topics(context.Context) ([]runtime.TopicRecord, error) {
	m.mu.Lock()
	out := make([]runtime.TopicRecord, 0, len(m.topics))
	for _, rec := range m.topics {
		out = append(out, rec)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CreateTopic implements runtime.Metastore: the record is put only if the
// key has never been created (a compare on its create revision), else the
// existing record is returned.
func (m *EtcdMetastore) CreateTopic(ctx context.Context, name string, partitions int, retention runtime.Retention) (runtime.TopicRecord, bool, error) {
	if err := wire.ValidateTopicName(name); err != nil {
		return runtime.TopicRecord{}, false, err
	}
	id, err := wire.NewIncarnationID(m.ids)
	if err != nil {
		return runtime.TopicRecord{}, false, err
	}
	rec := runtime.TopicRecord{Name: name, Incarnation: id, Partitions: partitions, RetentionMs: retention.Ms, RetentionBytes: retention.Bytes}
	if err := servable(rec); err != nil {
		return runtime.TopicRecord{}, false, err
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return runtime.TopicRecord{}, false, err
	}
	key := m.keys.topic(name)
	resp, err := m.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return runtime.TopicRecord{}, false, fmt.Errorf("cluster: create topic %s: %w", name, err)
	}
	if resp.Succeeded {
		rec.Version = uint64(resp.Header.Revision)
		return rec, true, m.waitApplied(ctx, resp.Header.Revision)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 { // deleted between the compare and the get: cannot be, they are one transaction
		return runtime.TopicRecord{}, false, fmt.Errorf("cluster: create topic %s: the record vanished", name)
	}
	existing, err := decodeTopic(name, kvs[0].Value, kvs[0].ModRevision)
	if err != nil {
		return runtime.TopicRecord{}, false, err
	}
	return existing, false, m.waitApplied(ctx, kvs[0].ModRevision)
}

// UpdateRetention implements runtime.Metastore: read, change, and put only
// if the record is still the one read (a compare on its mod revision),
// else again. change may run more than once.
func (m *EtcdMetastore) UpdateRetention(ctx context.Context, name string, change func(runtime.Retention) (runtime.Retention, error)) (runtime.TopicRecord, error) {
	key := m.keys.topic(name)
	for {
		got, err := m.cli.Get(ctx, key)
		if err != nil {
			return runtime.TopicRecord{}, fmt.Errorf("cluster: read topic %s: %w", name, err)
		}
		if len(got.Kvs) == 0 {
			return runtime.TopicRecord{}, fmt.Errorf("%w: %s", runtime.ErrTopicNotFound, name)
		}
		cur, err := decodeTopic(name, got.Kvs[0].Value, got.Kvs[0].ModRevision)
		if err != nil {
			return runtime.TopicRecord{}, err
		}
		retention, err := change(cur.Retention())
		if err != nil {
			return runtime.TopicRecord{}, err
		}
		next := cur
		next.RetentionMs, next.RetentionBytes, next.Version = retention.Ms, retention.Bytes, 0
		if err := servable(next); err != nil {
			return runtime.TopicRecord{}, err
		}
		val, err := json.Marshal(next)
		if err != nil {
			return runtime.TopicRecord{}, err
		}
		resp, err := m.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", got.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, string(val))).
			Commit()
		if err != nil {
			return runtime.TopicRecord{}, fmt.Errorf("cluster: retention of %s: %w", name, err)
		}
		if !resp.Succeeded {
			continue // changed under us: read it again
		}
		if err := m.waitApplied(ctx, resp.Header.Revision); err != nil {
			return runtime.TopicRecord{}, err
		}
		next.Version = uint64(resp.Header.Revision)
		return next, nil
	}
}

// DeleteTopic implements runtime.Metastore: the record and the topic's
// assignment go in one transaction.
func (m *EtcdMetastore) DeleteTopic(ctx context.Context, name string) error {
	key := m.keys.topic(name)
	resp, err := m.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(m.keys.assignments(name), clientv3.WithPrefix()),
			clientv3.OpDelete(m.keys.moves(name), clientv3.WithPrefix())).
		Commit()
	if err != nil {
		return fmt.Errorf("cluster: delete topic %s: %w", name, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s", runtime.ErrTopicNotFound, name)
	}
	return m.waitApplied(ctx, resp.Header.Revision)
}

// DeleteRefusedTopic implements runtime.RefusedTopicDeleter: it deletes
// the record under name, with the topic's assignments and moves as
// DeleteTopic does, when decodeTopic refuses it (deleted true). A name
// with no record, or one that decodes, is left alone. The delete holds
// only while the record is the one read (its revision), so a repair that
// rewrote it meanwhile is never deleted on the strength of the damaged
// one.
func (m *EtcdMetastore) DeleteRefusedTopic(ctx context.Context, name string) (bool, error) {
	key := m.keys.topic(name)
	got, err := m.cli.Get(ctx, key)
	if err != nil {
		return false, fmt.Errorf("cluster: read topic %s: %w", name, err)
	}
	if len(got.Kvs) == 0 {
		return false, nil
	}
	kv := got.Kvs[0]
	if _, err := decodeTopic(name, kv.Value, kv.ModRevision); err == nil {
		return false, nil
	}
	resp, err := m.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(m.keys.assignments(name), clientv3.WithPrefix()),
			clientv3.OpDelete(m.keys.moves(name), clientv3.WithPrefix())).
		Commit()
	if err != nil {
		return false, fmt.Errorf("cluster: delete topic %s: %w", name, err)
	}
	if !resp.Succeeded {
		return false, nil
	}
	return true, m.waitApplied(ctx, resp.Header.Revision)
}

// Assigned implements runtime.Metastore, from the replica: the topic is
// known, the partition is one of its, and the assignment names this node.
func (m *EtcdMetastore) Assigned(_ context.Context, topic string, partition int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.topics[topic]
	k := partitionKey{topic, partition}
	return ok && partition >= 0 && partition < rec.Partitions && m.owners[k] == m.nodeID && !m.frozenLocked(k), nil
}

// frozenLocked reports whether a frozen move of the partition is under
// way: its old owner serves it no more, its new owner not yet. The caller
// holds mu.
func (m *EtcdMetastore) frozenLocked(k partitionKey) bool {
	mv, ok := m.moves[k]
	return ok && mv.State == MoveFrozen
}

// Owner returns the id of the node the replica says owns a partition;
// ok is false when it is unassigned.
func (m *EtcdMetastore) Owner(topic string, partition int) (node string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, ok = m.owners[partitionKey{topic, partition}]
	return node, ok
}

// CatchUp brings the replica up to what etcd holds now: a linearizable
// read of etcd's revision, then a wait, until ctx ends, for the watch to
// apply it. What another node saw in etcd before the call, the replica
// holds after it.
func (m *EtcdMetastore) CatchUp(ctx context.Context) error {
	resp, err := m.cli.Get(ctx, m.keys.root+"settle") // any key: the header carries etcd's revision
	if err != nil {
		return fmt.Errorf("cluster: read etcd's revision: %w", err)
	}
	return m.waitApplied(ctx, resp.Header.Revision)
}

// Settle brings the replica up to what etcd holds now (CatchUp), then
// waits while the partition has no owner, until ctx ends: a node asked
// for a partition of a topic another node just made answers from the
// record and the assignment, not from its watch's delay. It reports
// whether the partition has an owner.
func (m *EtcdMetastore) Settle(ctx context.Context, topic string, partition int) bool {
	if m.CatchUp(ctx) != nil {
		return false
	}
	for {
		m.mu.Lock()
		rec, known := m.topics[topic]
		_, owned := m.owners[partitionKey{topic, partition}]
		advanced := m.advanced
		m.mu.Unlock()
		if owned || !known || partition >= rec.Partitions {
			return owned
		}
		select {
		case <-advanced:
		case <-m.closed:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// OwnedBy counts the partitions the replica says node owns.
func (m *EtcdMetastore) OwnedBy(node string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, owner := range m.owners {
		if owner == node {
			n++
		}
	}
	return n
}

// Location is where a partition is served, as the replica knows it.
type Location struct {
	NodeID string // the owner's id
	// Addr is the owner's HTTP address while it is a live member; empty
	// while it is not (down, or cut off from etcd longer than its TTL).
	Addr string
	// Moving: a frozen move of the partition is under way, so no node
	// serves it until the move completes (or is cancelled).
	Moving bool
}

// Locate returns a partition's owner and, while the owner is a live
// member, its address; ok is false when the partition has no owner.
func (m *EtcdMetastore) Locate(topic string, partition int) (loc Location, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, ok := m.owners[partitionKey{topic, partition}]
	if !ok {
		return Location{}, false
	}
	return Location{NodeID: node, Addr: m.members[node].Addr, Moving: m.frozenLocked(partitionKey{topic, partition})}, true
}

// CaughtUp implements runtime.Metastore.
func (m *EtcdMetastore) CaughtUp() bool { return m.caughtUp.Load() }

// CaughtUpChanged returns a channel closed at CaughtUp's next change: a
// caller takes it, then reads CaughtUp, and waits on it for a change.
func (m *EtcdMetastore) CaughtUpChanged() <-chan struct{} {
	m.cuMu.Lock()
	defer m.cuMu.Unlock()
	return m.cuChanged
}

func (m *EtcdMetastore) setCaughtUp(v bool) {
	if m.caughtUp.Swap(v) == v {
		return
	}
	m.cuMu.Lock()
	close(m.cuChanged)
	m.cuChanged = make(chan struct{})
	m.cuMu.Unlock()
}

// IncarnationGone implements runtime.Metastore with a linearizable read:
// never the replica, which may be behind.
func (m *EtcdMetastore) IncarnationGone(ctx context.Context, name string, id wire.IncarnationID) (bool, error) {
	got, err := m.cli.Get(ctx, m.keys.topic(name))
	if err != nil {
		return false, fmt.Errorf("cluster: read topic %s: %w", name, err)
	}
	if len(got.Kvs) == 0 {
		return true, nil
	}
	if id == "" {
		return false, nil // a record is there, whatever it says: an unmarked directory may be its
	}
	rec, err := decodeTopic(name, got.Kvs[0].Value, got.Kvs[0].ModRevision)
	if err != nil {
		return false, err
	}
	return rec.Incarnation != id, nil
}

// Subscribe implements runtime.Metastore: f hears the name of every topic
// whose record or assignment the replica sees change, on the watch's
// goroutine; f must not block.
func (m *EtcdMetastore) Subscribe(f func(topic string)) (cancel func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.nextSub
	m.nextSub++
	m.subs[id] = f
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.subs, id)
	}
}

// waitApplied waits until the replica has applied revision rev, so a
// change its caller made is what the replica serves next.
func (m *EtcdMetastore) waitApplied(ctx context.Context, rev int64) error {
	for {
		m.mu.Lock()
		applied, advanced := m.applied, m.advanced
		m.mu.Unlock()
		if applied >= rev {
			return nil
		}
		select {
		case <-advanced:
		case <-m.closed:
			return fmt.Errorf("cluster: the change is in etcd at revision %d, but the metastore closed before its replica had it", rev)
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for the replica to reach revision %d (at %d): %w", rev, applied, ctx.Err())
		}
	}
}

// reload reads every record under the prefix and makes the replica what
// it read, telling subscribers about every topic that differs.
func (m *EtcdMetastore) reload(ctx context.Context) error {
	resp, err := m.cli.Get(ctx, m.keys.root, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("cluster: read %s: %w", m.keys.root, err)
	}
	topics := map[string]runtime.TopicRecord{}
	owners := map[partitionKey]string{}
	members := map[string]MemberInfo{}
	moves := map[partitionKey]Move{}
	drains, lost := map[string]bool{}, map[string]bool{}
	for _, kv := range resp.Kvs {
		switch kind, id, _ := m.keys.parse(string(kv.Key)); kind {
		case keyDrain:
			drains[id] = true
			continue
		case keyLost:
			lost[id] = true
			continue
		}
		m.decodeInto(topics, owners, members, moves, string(kv.Key), kv.Value, kv.ModRevision)
	}
	m.mu.Lock()
	changed := map[string]bool{}
	for name, rec := range topics {
		if old, ok := m.topics[name]; !ok || old != rec {
			changed[name] = true
		}
	}
	for name := range m.topics {
		if _, ok := topics[name]; !ok {
			changed[name] = true
		}
	}
	for k, node := range owners {
		if m.owners[k] != node {
			changed[k.topic] = true
		}
	}
	for k := range m.owners {
		if _, ok := owners[k]; !ok {
			changed[k.topic] = true
		}
	}
	for k, mv := range moves {
		if m.moves[k] != mv {
			changed[k.topic] = true
		}
	}
	for k := range m.moves {
		if _, ok := moves[k]; !ok {
			changed[k.topic] = true
		}
	}
	m.topics, m.owners, m.members, m.moves, m.drains, m.lost = topics, owners, members, moves, drains, lost
	subs := m.advanceLocked(resp.Header.Revision)
	m.mu.Unlock()
	for name := range changed {
		notify(subs, name)
	}
	return nil
}

// decodeInto puts the record at key into topics, owners or members; a
// topic or member record it cannot read is logged and taken out.
func (m *EtcdMetastore) decodeInto(topics map[string]runtime.TopicRecord, owners map[partitionKey]string, members map[string]MemberInfo,
	moves map[partitionKey]Move, key string, value []byte, modRev int64) {
	switch kind, name, p := m.keys.parse(key); kind {
	case keyTopic:
		rec, err := decodeTopic(name, value, modRev)
		if err != nil { // no record this node can read: no topic it serves
			m.logger.Error("unreadable topic record left out", zap.String("key", key), zap.Error(err))
			delete(topics, name)
			return
		}
		topics[name] = rec
	case keyAssignment:
		owners[partitionKey{name, p}] = string(value)
	case keyMember:
		var info MemberInfo
		if err := json.Unmarshal(value, &info); err != nil || info.ID != name {
			m.logger.Error("unreadable member record left out", zap.String("key", key), zap.Error(err))
			delete(members, name)
			return
		}
		members[name] = info
	case keyMove:
		var mv Move
		if err := json.Unmarshal(value, &mv); err != nil || mv.Topic != name || mv.Partition != p {
			m.logger.Error("unreadable move record left out", zap.String("key", key), zap.Error(err))
			delete(moves, partitionKey{name, p})
			return
		}
		mv.Rev = modRev
		moves[partitionKey{name, p}] = mv
	}
}

// follow keeps the replica following etcd: a watch of the prefix from the
// revision after the one applied; when it ends (a compaction it missed, a
// lost leader, etcd unreachable) a fresh read of the prefix, then a new
// watch.
func (m *EtcdMetastore) follow(ctx context.Context) {
	defer m.done.Done()
	for ctx.Err() == nil {
		m.mu.Lock()
		from := m.applied + 1
		m.mu.Unlock()
		watchCtx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range m.cli.Watch(watchCtx, m.keys.root, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify()) {
			if err := resp.Err(); err != nil || resp.Canceled {
				m.logger.Info("etcd watch ended; reading the records again", zap.Error(err))
				break
			}
			// The revision applied is the last event's: a watch that catches
			// up sends its backlog in batches, each headed with etcd's
			// current revision, not the batch's (found by review). A
			// progress notification, sent only to a watch that has caught
			// up, carries the revision it has seen everything to.
			rev := resp.Header.Revision
			if n := len(resp.Events); n > 0 {
				rev = resp.Events[n-1].Kv.ModRevision
			}
			m.apply(resp.Events, rev)
		}
		cancel()
		for ctx.Err() == nil {
			readCtx, cancel := context.WithTimeout(ctx, max(10*m.interval, time.Minute)) // a large prefix takes seconds
			err := m.reload(readCtx)
			cancel()
			if err == nil {
				break
			}
			m.logger.Warn("reading the records from etcd failed; retrying", zap.Error(err))
			select {
			case <-ctx.Done():
			case <-time.After(m.interval):
			}
		}
	}
}

// apply applies a watch response's events, then moves applied to rev (a
// progress notification has no events and moves it all the same).
func (m *EtcdMetastore) apply(events []*clientv3.Event, rev int64) {
	changed := map[string]bool{}
	m.mu.Lock()
	for _, ev := range events {
		key := string(ev.Kv.Key)
		kind, name, p := m.keys.parse(key)
		if kind == keyOther || kind == keyFence { // a fence horizon changes no topic
			continue
		}
		if kind == keyDrain || kind == keyLost {
			marks := m.drains
			if kind == keyLost {
				marks = m.lost
			}
			if ev.Type == clientv3.EventTypeDelete {
				delete(marks, name)
			} else {
				marks[name] = true
			}
			continue
		}
		if kind != keyMember {
			changed[name] = true // a member's comings and goings change no topic
		}
		if ev.Type == clientv3.EventTypeDelete {
			switch kind {
			case keyTopic:
				delete(m.topics, name)
			case keyAssignment:
				delete(m.owners, partitionKey{name, p})
			case keyMember:
				delete(m.members, name)
			case keyMove:
				delete(m.moves, partitionKey{name, p})
			}
			continue
		}
		m.decodeInto(m.topics, m.owners, m.members, m.moves, key, ev.Kv.Value, ev.Kv.ModRevision)
	}
	subs := m.advanceLocked(rev)
	m.mu.Unlock()
	for name := range changed {
		notify(subs, name)
	}
}

// advanceLocked moves applied to rev (never back) and returns the
// subscribers to tell.
func (m *EtcdMetastore) advanceLocked(rev int64) []func(string) {
	if rev > m.applied {
		m.applied = rev
		close(m.advanced)
		m.advanced = make(chan struct{})
	}
	subs := make([]func(string), 0, len(m.subs))
	for _, f := range m.subs {
		subs = append(subs, f)
	}
	return subs
}

// checkProgress keeps CaughtUp true while the replica has applied, by
// each check, the revision etcd was at one check before: every interval
// it reads etcd's current revision (a linearizable read of a key nobody
// writes) and asks the watch for a progress notification, which moves
// applied there even when nothing under the prefix changed. A failed read
// makes it false at once.
func (m *EtcdMetastore) checkProgress(ctx context.Context) {
	defer m.done.Done()
	var target int64 // etcd's revision at the previous check; 0 before the first
	tick := time.NewTicker(m.interval)
	defer tick.Stop()
	for {
		// The watch's stream is the one its context's metadata names
		// (WithRequireLeader): the progress request must name it too. A
		// timeout: with etcd down, a failed check, not a hung one.
		checkCtx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), m.interval)
		resp, err := m.cli.Get(checkCtx, m.keys.root+"progress")
		if err == nil {
			err = m.cli.RequestProgress(checkCtx)
		}
		cancel()
		m.mu.Lock()
		applied := m.applied
		m.mu.Unlock()
		if err != nil {
			m.setCaughtUp(false)
			target = 0 // the next check's revision is the first to count (found by review)
		} else {
			m.setCaughtUp(target > 0 && applied >= target)
			target = resp.Header.Revision
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// notify tells each subscriber that topic changed.
func notify(subs []func(string), topic string) {
	for _, f := range subs {
		f(topic)
	}
}

// decodeTopic reads a topic record stored under name. A record whose
// partitions or retention no node would have written (damage, or a
// writer that is not a node) is refused, never served: the assigner
// walks every partition of every topic, and a node opens any of them.
// Like a record that is not JSON, it is left out of the replica, so no
// node serves or changes that topic until the record in etcd is
// rewritten (etcdctl) or the topic deleted (DeleteRefusedTopic).
func decodeTopic(name string, value []byte, modRev int64) (runtime.TopicRecord, error) {
	var rec runtime.TopicRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return rec, fmt.Errorf("cluster: topic record %s: %w", name, err)
	}
	if rec.Name != name {
		return rec, fmt.Errorf("cluster: topic record under %s names %q", name, rec.Name)
	}
	if err := servable(rec); err != nil {
		return rec, err
	}
	rec.Version = uint64(modRev)
	return rec, nil
}

// servable checks what decodeTopic takes of a record read and what the
// writes put in one (runtime.ValidateTopicSettings).
func servable(rec runtime.TopicRecord) error {
	if err := runtime.ValidateTopicSettings(rec.Partitions, rec.Retention()); err != nil {
		return fmt.Errorf("cluster: topic record %s: %w", rec.Name, err)
	}
	return nil
}

// keys is the key layout under one prefix (the package doc).
type keys struct{ root string }

func newKeys(prefix string) keys {
	if prefix == "" {
		prefix = "/narad/"
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return keys{root: prefix}
}

func (k keys) topic(name string) string { return k.root + "topics/" + name }
func (k keys) topics() string           { return k.root + "topics/" }
func (k keys) members() string          { return k.root + "members/" }
func (k keys) member(id string) string  { return k.members() + id }
func (k keys) election() string         { return k.root + "assigner/" }
func (k keys) clusterID() string        { return k.root + "cluster-id" }
func (k keys) drains() string           { return k.root + "drain/" }
func (k keys) drain(id string) string   { return k.drains() + id }
func (k keys) rebalanced() string       { return k.root + "rebalanced" }
func (k keys) losts() string            { return k.root + "lost/" }
func (k keys) lost(id string) string    { return k.losts() + id }
func (k keys) fence(id string) string   { return k.root + "fence/" + id }
func (k keys) moves(name string) string { return k.root + "moves/" + name + "/" }
func (k keys) move(name string, p int) string {
	return k.moves(name) + strconv.Itoa(p)
}
func (k keys) assignments(name string) string { return k.root + "assign/" + name + "/" }
func (k keys) assignment(name string, p int) string {
	return k.assignments(name) + strconv.Itoa(p)
}

type keyKind int

const (
	keyOther keyKind = iota
	keyTopic
	keyAssignment
	keyMember
	keyMove
	keyDrain
	keyLost
	keyFence
)

// parse says what key holds: a topic record (name), an assignment or a
// move (name, partition), a member record or a drain mark (name is the
// node's id); anything else under the prefix is keyOther.
func (k keys) parse(key string) (kind keyKind, name string, partition int) {
	rest, ok := strings.CutPrefix(key, k.root)
	if !ok {
		return keyOther, "", 0
	}
	if name, ok := strings.CutPrefix(rest, "topics/"); ok && wire.ValidateTopicName(name) == nil {
		return keyTopic, name, 0
	}
	if id, ok := strings.CutPrefix(rest, "members/"); ok && id != "" && !strings.Contains(id, "/") {
		return keyMember, id, 0
	}
	if id, ok := strings.CutPrefix(rest, "drain/"); ok && id != "" && !strings.Contains(id, "/") {
		return keyDrain, id, 0
	}
	if id, ok := strings.CutPrefix(rest, "lost/"); ok && id != "" && !strings.Contains(id, "/") {
		return keyLost, id, 0
	}
	if id, ok := strings.CutPrefix(rest, "fence/"); ok && id != "" && !strings.Contains(id, "/") {
		return keyFence, id, 0
	}
	for prefix, kind := range map[string]keyKind{"assign/": keyAssignment, "moves/": keyMove} {
		if tp, ok := strings.CutPrefix(rest, prefix); ok {
			name, ps, ok := strings.Cut(tp, "/")
			p, err := strconv.Atoi(ps)
			if ok && err == nil && p >= 0 && wire.ValidateTopicName(name) == nil {
				return kind, name, p
			}
		}
	}
	return keyOther, "", 0
}
