package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdEndpoints reads --metastore: "local" (or empty) is the embedded
// metastore (nil, no error); etcd://host:port[,host:port...] names etcd's
// client endpoints, and etcd+unix:///path a local etcd's Unix socket.
func etcdEndpoints(spec string) ([]string, error) {
	switch {
	case spec == "" || spec == "local":
		return nil, nil
	case strings.HasPrefix(spec, "etcd+unix://"):
		path := strings.TrimPrefix(spec, "etcd+unix://")
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("metastore %q: want etcd+unix:///absolute/path", spec)
		}
		return []string{"unix://" + path}, nil
	case strings.HasPrefix(spec, "etcd://"):
		var out []string
		for _, hp := range strings.Split(strings.TrimPrefix(spec, "etcd://"), ",") {
			if host, port, err := net.SplitHostPort(hp); err != nil || host == "" || port == "" {
				return nil, fmt.Errorf("metastore %q: %q is not host:port", spec, hp)
			}
			out = append(out, "http://"+hp)
		}
		return out, nil
	}
	return nil, fmt.Errorf("metastore %q: want local, etcd://host:port[,host:port...] or etcd+unix:///path", spec)
}

// advertised is the address other nodes and clients reach this one at:
// --advertise-addr (a URL, or host:port taken as the scheme served), else
// the address listened on, unless that is a wildcard (0.0.0.0, [::]),
// which names no one host.
func advertised(flagAddr, scheme string, listening net.Addr) (string, error) {
	if flagAddr != "" {
		if !strings.Contains(flagAddr, "://") {
			flagAddr = scheme + "://" + flagAddr
		}
		u, err := url.Parse(flagAddr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return "", fmt.Errorf("advertise-addr %q: want host:port or %s://host:port", flagAddr, scheme)
		}
		if u.Scheme != scheme {
			return "", fmt.Errorf("advertise-addr %q: this node serves %s", flagAddr, scheme)
		}
		return u.Scheme + "://" + u.Host, nil
	}
	tcp, ok := listening.(*net.TCPAddr)
	if !ok || tcp.IP.IsUnspecified() {
		return "", fmt.Errorf("listening on %s, which names no one host: give --advertise-addr", listening)
	}
	return scheme + "://" + listening.String(), nil
}

// peerTLSConfig is the TLS configuration of the calls this node makes to
// other nodes (a move's transfer): none while the node serves plain HTTP
// (so do its peers), else the system's roots or, with --peer-ca, the CA
// that signed the nodes' certificates.
func peerTLSConfig(cfg Config, tlsOn bool) (*tls.Config, error) {
	if !tlsOn {
		return nil, nil
	}
	out := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.PeerCA != "" {
		pem, err := vfs.ReadFile(vfs.OS{}, cfg.PeerCA, 1<<20)
		if err != nil {
			return nil, fmt.Errorf("peer-ca: %w", err)
		}
		out.RootCAs = x509.NewCertPool()
		if !out.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("peer-ca %s holds no PEM certificate", cfg.PeerCA)
		}
	}
	return out, nil
}

// clusterNode is this daemon's membership of a cluster on etcd: the
// client, the metastore on etcd, and (once the node listens) its
// registration and its candidacy for assigning partitions.
type clusterNode struct {
	id          string
	cli         *clientv3.Client
	ms          *cluster.EtcdMetastore
	member      atomic.Pointer[cluster.Member] // nil until join; the API reads it (serving)
	assigner    *cluster.Assigner
	ttl         time.Duration
	fenceAfter  time.Duration
	logger      *zap.Logger
	partMu      sync.Mutex
	partLocks   map[string]*sync.Mutex // "topic/p" -> the partition's move lock (lockPartition); under partMu
	stop        chan struct{}          // closed by close: reportCatchUp returns
	unsubscribe func()                 // ends logChange; nil before the replica caught up
	reported    chan struct{}          // closed when reportCatchUp returned
}

// openClusterNode opens this node's membership of the cluster over its
// data directory, which must be this node's of this cluster (or new): it
// never takes a node alone's directory, never another node's or another
// cluster's, and never a new directory under the id of a node that owns
// partitions (a node that lost its disk would serve them from offset 0
// again). The ids are recorded at the first start, once the checks pass.
func openClusterNode(ctx context.Context, files vfs.FS, cfg Config, endpoints []string, logger *zap.Logger) (*clusterNode, error) {
	dir := cfg.DataDir
	if alone, err := runtime.ServedAlone(files, dir); err != nil {
		return nil, err
	} else if alone {
		return nil, fmt.Errorf("%w: %s has served a node alone (its topic records are in its metastore file); a cluster's node cannot take it: start it without --metastore", datadir.ErrIdentity, dir)
	}
	storedNode, hasNode, err := datadir.StoredNodeID(files, dir)
	if err != nil {
		return nil, err
	}
	storedCluster, hasCluster, err := datadir.StoredClusterID(files, dir)
	if err != nil {
		return nil, err
	}
	id := cfg.NodeID
	switch {
	case hasNode && id != "" && id != storedNode:
		return nil, fmt.Errorf("%w: %s is node %q's, not %q", datadir.ErrIdentity, dir, storedNode, id)
	case hasNode:
		id = storedNode
	case id == "":
		id = datadir.NewNodeID()
	}
	c, err := openCluster(ctx, endpoints, id, time.Duration(cfg.MemberTTL), logger)
	if err != nil {
		return nil, err
	}
	c.fenceAfter = time.Duration(cfg.FenceAfter)
	if err := c.checkIdentity(ctx, files, dir, hasNode, storedCluster, hasCluster); err != nil {
		c.close(context.Background()) // not joined: nothing to leave
		return nil, err
	}
	return c, nil
}

// checkIdentity checks the data directory against the cluster, then
// records the node's and the cluster's ids in it.
func (c *clusterNode) checkIdentity(ctx context.Context, files vfs.FS, dir string, hasNode bool, storedCluster string, hasCluster bool) error {
	readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Only a new directory may make the cluster: one that has served (it
	// has a node id) only joins the cluster etcd holds.
	clusterID, err := cluster.ClusterID(readCtx, c.cli, "", !hasCluster && !hasNode)
	if errors.Is(err, cluster.ErrNoCluster) {
		return fmt.Errorf("%w: %s has served node %q of a cluster (%s), and etcd holds no cluster: wrong --metastore endpoints, or etcd's data was lost",
			datadir.ErrIdentity, dir, c.id, storedCluster)
	}
	if err != nil {
		return err
	}
	if hasCluster && clusterID != storedCluster {
		return fmt.Errorf("%w: %s belongs to cluster %s, and etcd holds cluster %s", datadir.ErrIdentity, dir, storedCluster, clusterID)
	}
	if owned := c.ms.OwnedBy(c.id); !hasNode && owned > 0 {
		return fmt.Errorf("%w: node id %q owns %d partitions of the cluster, and %s is new: a node whose disk was lost must not take its id back (its partitions would serve from offset 0 again)",
			datadir.ErrIdentity, c.id, owned, dir)
	}
	if err := datadir.RecordClusterID(files, dir, clusterID); err != nil {
		return err
	}
	return datadir.RecordNodeID(files, dir, c.id)
}

// openCluster connects to etcd and opens the metastore on it, retrying
// while etcd cannot be reached (a node that cannot read the cluster's
// records cannot know what it owns) until ctx ends; then it waits until
// the replica is caught up, so startup's sweeps and opens see every
// record etcd held.
func openCluster(ctx context.Context, endpoints []string, id string, ttl time.Duration, logger *zap.Logger) (*clusterNode, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		// Its retries while etcd is away would log at warn without end;
		// the metastore and the member say what matters.
		Logger: logger.Named("etcd").WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel)),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	c := &clusterNode{id: id, cli: cli, ttl: ttl, logger: logger, stop: make(chan struct{}), reported: make(chan struct{})}
	for attempt := 0; ; attempt++ {
		openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c.ms, err = cluster.OpenEtcdMetastore(openCtx, cluster.Config{Client: cli, NodeID: id, Logger: logger.Named("metastore")})
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			cli.Close()
			return nil, ctx.Err()
		}
		logger.Warn("cannot read the cluster's records from etcd; retrying", zap.Strings("endpoints", endpoints), zap.Error(err))
		if err := sleepCtx(ctx, min(time.Second<<attempt, 10*time.Second)); err != nil {
			cli.Close()
			return nil, err
		}
	}
	for {
		changed := c.ms.CaughtUpChanged()
		if c.ms.CaughtUp() {
			logger.Info("metastore caught up with etcd", zap.String("node_id", id))
			go c.reportCatchUp()
			c.unsubscribe = c.ms.Subscribe(c.logChange)
			return c, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			close(c.reported)
			c.close(context.Background()) // not joined: nothing to leave
			return nil, ctx.Err()
		}
	}
}

// logChange logs, at debug, each topic record this node's replica
// applies: when a node learned of a change.
func (c *clusterNode) logChange(topic string) {
	rec, ok, _ := c.ms.Topic(context.Background(), topic)
	owned := 0
	for p := range rec.Partitions {
		if _, has := c.ms.Locate(topic, p); has {
			owned++
		}
	}
	c.logger.Debug("topic record applied", zap.String("topic", topic), zap.Bool("exists", ok),
		zap.String("incarnation", string(rec.Incarnation)), zap.Uint64("version", rec.Version), zap.Int("partitions_with_owner", owned))
}

// reportCatchUp logs each change of the replica's catch-up with etcd
// until close: behind, the node serves what it owns from what it last
// read, and its changes wait for etcd.
func (c *clusterNode) reportCatchUp() {
	defer close(c.reported)
	caughtUp := true
	for {
		changed := c.ms.CaughtUpChanged()
		if now := c.ms.CaughtUp(); now != caughtUp {
			caughtUp = now
			if now {
				c.logger.Info("metastore caught up with etcd")
			} else {
				c.logger.Warn("metastore behind etcd (unreachable, or slow): serving the partitions this node owns from its last reading")
			}
		}
		select {
		case <-changed:
		case <-c.stop:
			return
		}
	}
}

// join registers the node at addr and starts its candidacy. A node
// marked lost first sets aside its copies of the partitions other nodes
// now own (setAsideReassigned) and clears its mark; so does it when its
// lease ran out and it finds itself marked on registering again.
func (c *clusterNode) join(ctx context.Context, addr string, node *runtime.Node) error {
	member, err := cluster.JoinCluster(ctx, cluster.MemberConfig{
		Client: c.cli, Info: cluster.MemberInfo{ID: c.id, Addr: addr}, TTL: c.ttl, FenceAfter: c.fenceAfter, Logger: c.logger.Named("member"),
		OnLost: func(ctx context.Context) error {
			_, err := c.ms.ResolveLost(ctx, func(ctx context.Context, topics []string, owned func(string, int) bool) error {
				return c.setAsideReassigned(ctx, node, topics, owned)
			})
			return err
		},
	})
	if err != nil {
		return fmt.Errorf("join the cluster: %w", err)
	}
	c.member.Store(member)
	c.assigner, err = cluster.StartAssigner(cluster.AssignerConfig{Client: c.cli, NodeID: c.id, TTL: c.ttl, FenceAfter: c.fenceAfter, Logger: c.logger.Named("assigner")})
	if err != nil {
		return fmt.Errorf("start the assigner: %w", err)
	}
	c.logger.Info("joined the cluster", zap.String("node_id", c.id), zap.String("advertise_addr", addr))
	return nil
}

// setAsideReassigned sets aside (never drops) this node's copy of every
// partition of topics that owned says is not its: what a node marked lost
// holds of the partitions given away may be records no other node has.
func (c *clusterNode) setAsideReassigned(ctx context.Context, node *runtime.Node, topics []string, owned func(string, int) bool) error {
	for _, topic := range topics {
		dirs, err := node.PartitionDirs(topic)
		if err != nil {
			return err
		}
		for _, p := range dirs {
			if owned(topic, p) {
				continue
			}
			unlock := c.lockPartition(topic, p)
			_, err := node.SetAsidePartition(ctx, topic, p)
			unlock()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Serving reports whether this node serves its partitions: registered,
// with its lease renewed within the fence horizon (cluster.Member).
func (c *clusterNode) Serving() bool {
	m := c.member.Load()
	return m != nil && m.Serving()
}

// Registration numbers this node's registration (cluster.Member's); 0
// before it joined.
func (c *clusterNode) Registration() uint64 {
	if m := c.member.Load(); m != nil {
		return m.Registration()
	}
	return 0
}

// leave ends the candidacy and the registration (the lease revoked, so
// the others see the node go at once); its partitions stay its. No etcd
// call it makes or waits for outlasts ctx (a stop's deadline).
func (c *clusterNode) leave(ctx context.Context) error {
	var err error
	if c.assigner != nil {
		err = c.assigner.Stop(ctx)
	}
	if m := c.member.Swap(nil); m != nil {
		err = errors.Join(err, m.Leave(ctx))
	}
	return err
}

// close leaves, by ctx's end, and stops following etcd; after the node
// is closed. A candidacy whose end the leave did not see ends once the
// client is closed, and close waits for it then (at once).
func (c *clusterNode) close(ctx context.Context) error {
	close(c.stop)
	<-c.reported
	if c.unsubscribe != nil {
		c.unsubscribe()
	}
	err := c.leave(ctx)
	if c.ms != nil {
		err = errors.Join(err, c.ms.Close())
	}
	err = errors.Join(err, c.cli.Close())
	if c.assigner != nil {
		c.assigner.Stop(context.Background())
	}
	return err
}

// lockPartition takes this node's move lock of a partition: a pull holds
// it from its receive to its completion's outcome, and a drop takes it,
// so a drop never lands between a pull's install and the completion that
// makes it this node's (found by review: the install was dropped, and the
// completed move served an empty partition).
func (c *clusterNode) lockPartition(topic string, p int) (unlock func()) {
	mu := c.partitionLock(topic, p)
	mu.Lock()
	return mu.Unlock
}

func (c *clusterNode) partitionLock(topic string, p int) *sync.Mutex {
	c.partMu.Lock()
	defer c.partMu.Unlock()
	if c.partLocks == nil {
		c.partLocks = map[string]*sync.Mutex{}
	}
	k := topic + "/" + strconv.Itoa(p)
	mu := c.partLocks[k]
	if mu == nil {
		mu = &sync.Mutex{}
		c.partLocks[k] = mu
	}
	return mu
}

// dropIfMoved drops this node's copy of a partition once etcd confirms
// (linearizably, never the replica) that another node owns it, and no
// move to this node is under way. Without wait, a partition whose move
// lock is held (a pull streaming it) is left for a later look.
func (c *clusterNode) dropIfMoved(ctx context.Context, node *runtime.Node, topic string, p int, wait bool) error {
	mu := c.partitionLock(topic, p)
	if wait {
		mu.Lock()
	} else if !mu.TryLock() {
		return fmt.Errorf("%w: %s/%d is being pulled", runtime.ErrAssigned, topic, p)
	}
	defer mu.Unlock()
	for _, mv := range c.ms.Moves() {
		if mv.Topic == topic && mv.Partition == p && mv.To == c.id {
			return fmt.Errorf("%w: %s/%d is moving here", runtime.ErrAssigned, topic, p)
		}
	}
	owner, ok, err := c.ms.ConfirmOwner(ctx, topic, p)
	if err != nil {
		return err
	}
	if !ok || owner == c.id {
		return fmt.Errorf("%w: %s/%d", runtime.ErrAssigned, topic, p)
	}
	return node.DropPartition(ctx, topic, p)
}

// Locate is the API's ownerLocator: where the replica says a partition
// is served.
func (c *clusterNode) Locate(topic string, p int) (cluster.Location, bool) {
	return c.ms.Locate(topic, p)
}

// Settle is the API's ownerLocator's.
func (c *clusterNode) Settle(ctx context.Context, topic string, p int) bool {
	return c.ms.Settle(ctx, topic, p)
}

// sleepCtx waits d, or until ctx ends (its error then).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
