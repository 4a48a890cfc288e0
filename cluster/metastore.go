package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
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
// Invariants: the fields above replica are set at open and never change;
// the replica's own are on its type (replica.go); closed is closed once,
// by Close.
type EtcdMetastore struct {
	cli      *clientv3.Client
	keys     keys
	nodeID   string
	interval time.Duration
	logger   *zap.Logger
	ids      io.Reader

	replica // the records, as the watch last applied them

	stop   context.CancelFunc
	closed chan struct{} // closed by Close: no change waits for the replica after it
	done   sync.WaitGroup
}

var (
	_ runtime.Metastore           = (*EtcdMetastore)(nil)
	_ runtime.RefusedTopicDeleter = (*EtcdMetastore)(nil)
)

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
		cli:      cfg.Client,
		keys:     newKeys(cfg.Prefix),
		nodeID:   cfg.NodeID,
		interval: cfg.ProgressInterval,
		logger:   cfg.Logger,
		ids:      cfg.IncarnationSource,
		replica:  replica{advanced: make(chan struct{}), subs: map[int]func(string){}, cuChanged: make(chan struct{})},
		closed:   make(chan struct{}),
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

// UpdateRetention implements runtime.Metastore (changeTopic). change may
// run more than once.
func (m *EtcdMetastore) UpdateRetention(ctx context.Context, name string, change func(runtime.Retention) (runtime.Retention, error)) (runtime.TopicRecord, error) {
	return m.changeTopic(ctx, name, "retention", func(next *runtime.TopicRecord) error {
		retention, err := change(next.Retention())
		if err != nil {
			return err
		}
		next.RetentionMs, next.RetentionBytes = retention.Ms, retention.Bytes
		return servable(*next)
	})
}

// SetDictionaryAfter implements runtime.Metastore (changeTopic).
func (m *EtcdMetastore) SetDictionaryAfter(ctx context.Context, name string, records int64) (runtime.TopicRecord, error) {
	return m.changeTopic(ctx, name, "dictionary option", func(next *runtime.TopicRecord) error {
		next.DictionaryAfter = records
		return nil
	})
}

// changeTopic reads a topic's record, changes it (change may run more
// than once, and refuse), and puts it only if the record is still the one
// read (a compare on its mod revision), else again; what names the change
// in an error.
func (m *EtcdMetastore) changeTopic(ctx context.Context, name, what string, change func(next *runtime.TopicRecord) error) (runtime.TopicRecord, error) {
	key := m.keys.topic(name)
	for {
		got, err := m.cli.Get(ctx, key)
		if err != nil {
			return runtime.TopicRecord{}, fmt.Errorf("cluster: read topic %s: %w", name, err)
		}
		if len(got.Kvs) == 0 {
			return runtime.TopicRecord{}, fmt.Errorf("%w: %s", runtime.ErrTopicNotFound, name)
		}
		next, err := decodeTopic(name, got.Kvs[0].Value, got.Kvs[0].ModRevision)
		if err != nil {
			return runtime.TopicRecord{}, err
		}
		if err := change(&next); err != nil {
			return runtime.TopicRecord{}, err
		}
		next.Version = 0
		val, err := json.Marshal(next)
		if err != nil {
			return runtime.TopicRecord{}, err
		}
		resp, err := m.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", got.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, string(val))).
			Commit()
		if err != nil {
			return runtime.TopicRecord{}, fmt.Errorf("cluster: %s of %s: %w", what, name, err)
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
