package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// MemberInfo is what a node registers about itself.
type MemberInfo struct {
	ID   string `json:"id"`
	Addr string `json:"addr"` // the HTTP address other nodes and clients reach it at
}

// MemberConfig configures a Member.
type MemberConfig struct {
	Client *clientv3.Client
	Prefix string // as Config.Prefix
	Info   MemberInfo
	// TTL is the lease's time to live: a node that stops renewing it
	// (dead, or cut off from etcd) leaves the member list this long after.
	// 10 s when zero; etcd's unit is the second.
	TTL    time.Duration
	Logger *zap.Logger
}

// Member keeps a node registered in the cluster: members/<id> holds its
// MemberInfo under a lease the member renews, so the key goes when the
// node does. It runs for the node's life: a lost lease (etcd unreachable
// longer than the TTL) is followed by a new one and the key put again.
// A member that leaves keeps its partitions (the assignment is not
// membership): there is no replication, so only the node that holds a
// partition's files can serve it.
type Member struct {
	cfg    MemberConfig
	keys   keys
	logger *zap.Logger

	mu      sync.Mutex
	session *concurrency.Session // the current lease; nil between sessions

	stop context.CancelFunc
	done chan struct{}
}

// ErrNodeIDLive: a live member is registered under the id.
var ErrNodeIDLive = errors.New("cluster: a live member has the node id")

// JoinCluster registers the node and keeps it registered until Leave.
// It returns once the first registration is in etcd. While a live member
// holds the id (the node's own registration from before a restart, until
// its lease runs out; or another node given the same id) it waits, saying
// so every try, until ctx ends.
func JoinCluster(ctx context.Context, cfg MemberConfig) (*Member, error) {
	if cfg.Client == nil || cfg.Info.ID == "" {
		return nil, errors.New("cluster: a member needs a client and an id")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	m := &Member{cfg: cfg, keys: newKeys(cfg.Prefix), logger: cfg.Logger, done: make(chan struct{})}
	if m.logger == nil {
		m.logger = zap.NewNop()
	}
	s, err := m.register(ctx, 0)
	for errors.Is(err, ErrNodeIDLive) {
		m.logger.Warn("waiting for the node id's registration to end: a restart waits out its lease; if another node runs with this id, stop it",
			zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(time.Second):
		}
		s, err = m.register(ctx, 0)
	}
	if err != nil {
		return nil, err
	}
	loop, stop := context.WithCancel(context.Background())
	m.stop = stop
	go m.keep(loop, s)
	return m, nil
}

// register takes a lease and puts the member key under it, unless a
// live member holds the key under another lease than prev (this member's
// own lease before it was lost: after etcd restarts, the key lives on
// under it until its TTL runs out, and is taken over). ctx bounds the
// calls; the lease's renewals run until the session is closed.
func (m *Member) register(ctx context.Context, prev clientv3.LeaseID) (*concurrency.Session, error) {
	ttl := max(1, int64(m.cfg.TTL/time.Second))
	lease, err := m.cfg.Client.Grant(ctx, ttl)
	if err != nil {
		return nil, fmt.Errorf("cluster: lease for member %s: %w", m.cfg.Info.ID, err)
	}
	s, err := concurrency.NewSession(m.cfg.Client, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(ttl)), concurrency.WithContext(context.Background()))
	if err != nil {
		return nil, fmt.Errorf("cluster: lease for member %s: %w", m.cfg.Info.ID, err)
	}
	val, err := json.Marshal(m.cfg.Info)
	if err != nil {
		s.Close()
		return nil, err
	}
	// Only if no live member has the id: two nodes under one id would
	// both take its partitions as theirs and ack into two logs.
	key := m.keys.member(m.cfg.Info.ID)
	txn, err := m.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(s.Lease()))).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("cluster: register member %s: %w", m.cfg.Info.ID, err)
	}
	if !txn.Succeeded {
		kvs := txn.Responses[0].GetResponseRange().Kvs
		if prev != 0 && len(kvs) == 1 && clientv3.LeaseID(kvs[0].Lease) == prev {
			took, err := m.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", prev)).
				Then(clientv3.OpPut(key, string(val), clientv3.WithLease(s.Lease()))).Commit()
			if err == nil && took.Succeeded {
				m.mu.Lock()
				m.session = s
				m.mu.Unlock()
				return s, nil
			}
		}
		s.Close()
		holder := "another process"
		if len(kvs) == 1 {
			var live MemberInfo
			if json.Unmarshal(kvs[0].Value, &live) == nil {
				holder = live.Addr
			}
		}
		return nil, fmt.Errorf("%w: %s, at %s", ErrNodeIDLive, m.cfg.Info.ID, holder)
	}
	m.mu.Lock()
	m.session = s
	m.mu.Unlock()
	return s, nil
}

// keep registers the member again whenever its lease is lost.
func (m *Member) keep(ctx context.Context, s *concurrency.Session) {
	defer close(m.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Done():
		}
		m.logger.Warn("cluster membership lease lost; registering again", zap.String("member", m.cfg.Info.ID))
		for {
			attempt, cancel := context.WithTimeout(ctx, m.cfg.TTL)
			next, err := m.register(attempt, s.Lease())
			cancel()
			if err == nil {
				s = next
				m.logger.Info("cluster membership registered again", zap.String("member", m.cfg.Info.ID))
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// Leave deregisters the node: its lease is revoked, so the key goes now,
// not a TTL later. With etcd unreachable it waits up to the TTL for the
// revoke and returns its error; the lease then runs out on its own.
func (m *Member) Leave() error {
	m.stop()
	<-m.done
	m.mu.Lock()
	s := m.session
	m.session = nil
	m.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close() // revokes the lease
}

// Members lists the registered members, by id.
func Members(ctx context.Context, cli *clientv3.Client, prefix string) ([]MemberInfo, error) {
	k := newKeys(prefix)
	resp, err := cli.Get(ctx, k.members(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("cluster: list members: %w", err)
	}
	out := make([]MemberInfo, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var mi MemberInfo
		if err := json.Unmarshal(kv.Value, &mi); err != nil || mi.ID == "" {
			continue // not a member record
		}
		out = append(out, mi)
	}
	return out, nil
}
