package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	TTL time.Duration
	// FenceAfter is how long the node serves on after the last lease
	// renewal it sent that etcd answered: past it, Serving is false until
	// a renewal succeeds. It is how long a node rides out etcd being
	// unreachable, and how long after a node left the assigner waits
	// before it gives a lost node's partitions away (lost.go). Each
	// registration writes it to fence/<id>, which outlives the lease, for
	// the assigner to read. DefaultFenceAfter when zero;
	// at least TTL (renewals go every third of it: a shorter horizon would
	// lapse between two of them).
	FenceAfter time.Duration
	// OnLost is called when a registration finds the node marked lost: it
	// sets the node's reassigned copies aside and clears the mark
	// (EtcdMetastore.ResolveLost), after which the registration is tried
	// again. Nil: the registration fails with ErrNodeLost.
	OnLost func(ctx context.Context) error
	Logger *zap.Logger
}

// DefaultFenceAfter is MemberConfig.FenceAfter's default.
const DefaultFenceAfter = time.Minute

// Member keeps a node registered in the cluster: members/<id> holds its
// MemberInfo under a lease the member renews every third of its TTL, so
// the key goes when the node does. A lease etcd no longer has (it ran
// out while the node could not reach etcd) is followed by a new one and
// the key put again, unless the node was marked lost meanwhile (OnLost).
// A member that leaves keeps its partitions (the assignment is not
// membership): there is no replication, so only the node that holds a
// partition's files can serve it.
//
// Invariants: Serving is true only before sent+FenceAfter, where sent is
// when the node sent the last renewal (or grant) of its current lease
// that etcd answered; a lease etcd reports gone, a Leave, and the time
// between registrations make it false at once.
type Member struct {
	cfg    MemberConfig
	keys   keys
	logger *zap.Logger

	base    time.Time    // a monotonic origin for servingUntil
	serving atomic.Int64 // nanoseconds after base until which the node serves; 0: not serving

	mu    sync.Mutex
	lease clientv3.LeaseID // the current lease; 0 between registrations

	registrations atomic.Uint64 // how many registrations succeeded (Registration)

	stop context.CancelFunc
	done chan struct{}
	// revokes bounds the revoke of a registration cut short (its lease
	// would linger a TTL), which outlives the registration's context;
	// halt ends it when a Leave's context ends.
	revokes context.Context
	halt    context.CancelFunc
}

// ErrNodeIDLive: a live member is registered under the id.
var ErrNodeIDLive = errors.New("cluster: a live member has the node id")

// JoinCluster registers the node and keeps it registered until Leave.
// It returns once the first registration is in etcd. While a live member
// holds the id (the node's own registration from before a restart, until
// its lease runs out; or another node given the same id) it waits, saying
// so every try, until ctx ends; a node marked lost is resolved first
// (OnLost).
func JoinCluster(ctx context.Context, cfg MemberConfig) (*Member, error) {
	if cfg.Client == nil || cfg.Info.ID == "" {
		return nil, errors.New("cluster: a member needs a client and an id")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.FenceAfter <= 0 {
		cfg.FenceAfter = DefaultFenceAfter
	}
	cfg.FenceAfter = max(cfg.FenceAfter, cfg.TTL)
	m := &Member{cfg: cfg, keys: newKeys(cfg.Prefix), logger: cfg.Logger, base: time.Now(), done: make(chan struct{})}
	m.revokes, m.halt = context.WithCancel(context.Background())
	if m.logger == nil {
		m.logger = zap.NewNop()
	}
	err := m.registerUntil(ctx, 0, func(err error) bool {
		if !errors.Is(err, ErrNodeIDLive) {
			return false
		}
		m.logger.Warn("waiting for the node id's registration to end: a restart waits out its lease; if another node runs with this id, stop it",
			zap.Error(err))
		return true
	})
	if err != nil {
		m.halt()
		return nil, err
	}
	loop, stop := context.WithCancel(context.Background())
	m.stop = stop
	go m.keep(loop)
	return m, nil
}

// registerUntil registers the node: a registration refused because the
// node is marked lost is resolved (OnLost) and tried again at once, and
// one failing with an error retry accepts is tried again a second later,
// until ctx ends. Each attempt is bounded by attempt when it is not zero.
func (m *Member) registerUntil(ctx context.Context, attempt time.Duration, retry func(error) bool) error {
	for {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if attempt > 0 {
			actx, cancel = context.WithTimeout(ctx, attempt)
		}
		err := m.register(actx)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrNodeLost) && m.cfg.OnLost != nil:
			m.resolveLost(ctx, err)
			continue
		case !retry(err):
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// Serving reports whether the node may serve its partitions: its lease
// was renewed within the fence horizon. The API answers calls for its
// partitions only while it is.
func (m *Member) Serving() bool {
	until := m.serving.Load()
	return until > 0 && time.Since(m.base) < time.Duration(until)
}

func (m *Member) serveUntil(t time.Time) { m.serving.Store(max(1, int64(t.Sub(m.base)))) }
func (m *Member) fence()                 { m.serving.Store(0) }

// register takes a lease and puts the member key under it, unless a live
// member holds the key, or the node is marked lost (ErrNodeLost). ctx
// bounds the calls.
func (m *Member) register(ctx context.Context) error {
	sent := time.Now()
	lease, err := m.cfg.Client.Grant(ctx, max(1, int64(m.cfg.TTL/time.Second)))
	if err != nil {
		return fmt.Errorf("cluster: lease for member %s: %w", m.cfg.Info.ID, err)
	}
	revoke := func() {
		rctx, cancel := context.WithTimeout(m.revokes, m.cfg.TTL)
		defer cancel()
		m.cfg.Client.Revoke(rctx, lease.ID) // else it runs out on its own
	}
	val, err := json.Marshal(m.cfg.Info)
	if err != nil {
		revoke()
		return err
	}
	// Only if no live member has the id (two nodes under one id would
	// both take its partitions as theirs and ack into two logs) and the
	// node is not marked lost.
	key, lost := m.keys.member(m.cfg.Info.ID), m.keys.lost(m.cfg.Info.ID)
	txn, err := m.cfg.Client.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(lost), "=", 0),
	).Then(
		clientv3.OpPut(key, string(val), clientv3.WithLease(lease.ID)),
		clientv3.OpPut(m.keys.fence(m.cfg.Info.ID), strconv.FormatInt(m.cfg.FenceAfter.Milliseconds(), 10)),
	).Else(clientv3.OpGet(key), clientv3.OpGet(lost)).Commit()
	if err != nil {
		revoke()
		return fmt.Errorf("cluster: register member %s: %w", m.cfg.Info.ID, err)
	}
	if !txn.Succeeded {
		revoke()
		if len(txn.Responses[1].GetResponseRange().Kvs) > 0 {
			return fmt.Errorf("%w: %s", ErrNodeLost, m.cfg.Info.ID)
		}
		holder := "another process"
		if kvs := txn.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			var live MemberInfo
			if json.Unmarshal(kvs[0].Value, &live) == nil {
				holder = live.Addr
			}
		}
		return fmt.Errorf("%w: %s, at %s", ErrNodeIDLive, m.cfg.Info.ID, holder)
	}
	m.mu.Lock()
	m.lease = lease.ID
	m.mu.Unlock()
	m.registrations.Add(1)
	m.serveUntil(sent.Add(m.cfg.FenceAfter))
	return nil
}

// Registration numbers the node's current registration: a call that saw
// Serving, then the same Registration and Serving again after its work,
// was served under one lease throughout, never across a lapse in which
// the node could have been marked lost and re-registered.
func (m *Member) Registration() uint64 { return m.registrations.Load() }

// resolveLost runs OnLost for a registration refused with err, logging
// what it does.
func (m *Member) resolveLost(ctx context.Context, err error) {
	m.logger.Error("this node was marked lost and its partitions given to other nodes: setting its copies of them aside, then registering",
		zap.Error(err))
	if err := m.cfg.OnLost(ctx); err != nil {
		m.logger.Error("setting aside the copies of a lost node's partitions", zap.Error(err))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// keep renews the lease every third of its TTL on one keepalive stream
// (a stream etcd already serves keeps working while it drains for a
// stop, when new calls are refused); each answer extends Serving to the
// fence horizon from when its renewal was sent. A stream that fails or
// goes quiet is replaced; a lease etcd reports gone is followed by a new
// registration.
func (m *Member) keep(ctx context.Context) {
	defer close(m.done)
	every := max(m.cfg.TTL/3, 100*time.Millisecond)
	failing, fenced := false, false
	renewed := func() {
		if failing {
			m.logger.Info("cluster membership serving again: lease renewed", zap.String("member", m.cfg.Info.ID))
		}
		failing, fenced = false, false
	}
	for ctx.Err() == nil {
		m.mu.Lock()
		lease := m.lease
		m.mu.Unlock()
		err := m.renew(ctx, lease, every, renewed)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			m.fence()
			m.logger.Warn("cluster membership lease lost; registering again", zap.String("member", m.cfg.Info.ID))
			if m.registerUntil(ctx, m.cfg.TTL, func(error) bool { return true }) != nil {
				return // ctx ended
			}
			m.logger.Info("cluster membership serving again: registered with a new lease", zap.String("member", m.cfg.Info.ID))
			failing, fenced = false, false
			continue
		}
		if !failing {
			m.logger.Warn("cannot renew the cluster membership lease (etcd unreachable?); serving on until the fence horizon",
				zap.String("member", m.cfg.Info.ID), zap.Duration("fence_after", m.cfg.FenceAfter), zap.Error(err))
		}
		failing = true
		if !fenced && !m.Serving() {
			fenced = true
			m.logger.Error("fenced: no lease renewal for the fence horizon; this node serves no partition until etcd answers again",
				zap.String("member", m.cfg.Info.ID), zap.Duration("fence_after", m.cfg.FenceAfter))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// renew runs one keepalive stream of lease: a renewal every every, each
// answer (in the order sent) extending Serving from the renewal's send
// time, renewed called after each. It returns when the stream fails,
// when no answer came for two periods (cancelled: etcd unreachable), or
// with rpctypes.ErrLeaseNotFound when etcd no longer has the lease.
func (m *Member) renew(ctx context.Context, lease clientv3.LeaseID, every time.Duration, renewed func()) error {
	sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	var helpers sync.WaitGroup // the sender: never outlives the call
	defer helpers.Wait()
	defer cancel()
	var answered atomic.Int64 // nanoseconds after base of the last answer (or the stream's start)
	answered.Store(int64(time.Since(m.base)))
	quiet := func() bool { return time.Since(m.base)-time.Duration(answered.Load()) > 2*every }
	var mu sync.Mutex
	var sent []time.Time                        // the renewals not answered yet, oldest first
	watchdog := time.AfterFunc(2*every, cancel) // stream creation waits for a connection: bounded like an answer
	stream, err := clientv3.RetryLeaseClient(m.cfg.Client).LeaseKeepAlive(sctx)
	watchdog.Stop()
	if err != nil {
		return err
	}
	helpers.Add(1)
	go func() {
		defer helpers.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			mu.Lock()
			sent = append(sent, time.Now())
			mu.Unlock()
			if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(lease)}); err != nil {
				cancel()
				return
			}
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
				if quiet() {
					cancel()
					return
				}
			}
		}
	}()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err // a quiet stream's is the cancel's
		}
		if resp.TTL <= 0 {
			return rpctypes.ErrLeaseNotFound
		}
		mu.Lock()
		var at time.Time
		if len(sent) > 0 {
			at, sent = sent[0], sent[1:]
		}
		mu.Unlock()
		if at.IsZero() {
			continue // an answer to no renewal sent: nothing it proves
		}
		answered.Store(int64(time.Since(m.base)))
		m.serveUntil(at.Add(m.cfg.FenceAfter))
		renewed()
	}
}

// Leave deregisters the node: it stops serving, and its lease is
// revoked, so the key goes now, not a TTL later. Every etcd call it makes
// or waits for ends by ctx's end (and the revoke within the TTL): with
// etcd unreachable it returns the revoke's error, and the lease runs out
// on its own.
func (m *Member) Leave(ctx context.Context) error {
	defer m.halt()
	stopHalt := context.AfterFunc(ctx, m.halt) // a registration's revoke under way ends with ctx
	defer stopHalt()
	m.stop()
	<-m.done
	m.fence()
	m.mu.Lock()
	lease := m.lease
	m.lease = 0
	m.mu.Unlock()
	if lease == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.TTL)
	defer cancel()
	_, err := m.cfg.Client.Revoke(ctx, lease)
	return err
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
