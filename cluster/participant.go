package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ParticipantConfig configures a Participant.
type ParticipantConfig struct {
	// Endpoints are etcd's client endpoints (clientv3.Config.Endpoints).
	Endpoints []string
	// DataDir is the node's data directory and FS its file system (the
	// real one when nil): the node's and the cluster's ids are checked
	// against it and recorded there (participant_identity.go).
	DataDir string
	FS      vfs.FS
	// NodeID is the node's id at its first start (a new one when empty);
	// a directory that has served keeps its own and refuses another.
	NodeID string
	// MemberTTL and FenceAfter are the membership's (MemberConfig).
	MemberTTL  time.Duration
	FenceAfter time.Duration
	// Transfer is how this node's mover reaches the nodes it pulls
	// partitions from. Required.
	Transfer Transfer
	// Logger gets what the node does in the cluster; zap.NewNop() when
	// nil.
	Logger *zap.Logger
}

// Participant is one node's part in the cluster: it checks the data
// directory's identity against the cluster, follows the cluster's records
// (its EtcdMetastore is the node's runtime.Metastore), registers the node
// and campaigns for assigning (Join), sets aside what a node marked lost
// holds of partitions given away, tells the API where partitions are
// served (Locate, Settle) and whether this node serves at all (Serving),
// runs the moves to this node (its mover pulls them through a Transfer)
// and answers the moves out of it (transfer_source.go), and leaves
// (Close).
//
// Its life: OpenParticipant; runtime.New over Metastore(); Attach; the
// node's Start; Join; StopMover; the node's Close; Close. Join, StopMover
// and Close are called in that order, each once the one before returned
// (package server's Close, on another goroutine, waits for its Start);
// the rest from any goroutine once Attach returned.
//
// Invariants:
//   - The node is attached once, before Join and before any move call;
//     every call this type makes on a node is on that one.
//   - The node is registered (a Member) from Join until Close left, and
//     Serving is true only then, while the Member says so.
//   - A pull holds its partition's move lock from its receive to its
//     completion's outcome; every drop and set-aside of a copy takes it
//     (copies.go), so none lands between a pull's install and the
//     completion that makes the partition this node's.
//   - A copy is dropped only once etcd confirms, linearizably, that
//     another node owns the partition and no move to this node is under
//     way; a copy of a partition given away while this node was marked
//     lost is set aside, never dropped.
//   - The mover runs from Join to StopMover, which the caller calls
//     before it closes the node; Close stops it too, then leaves, then
//     stops following etcd.
type Participant struct {
	id         string
	cli        *clientv3.Client
	ms         *EtcdMetastore
	node       *runtime.Node // Attach's
	transfer   Transfer
	ttl        time.Duration
	fenceAfter time.Duration
	logger     *zap.Logger

	member   atomic.Pointer[Member] // nil until Join and after the leave; the API reads it (Serving)
	assigner *Assigner              // nil until Join
	mover    *mover                 // nil until Join

	locks partitionLocks // the partitions' move locks

	stop        chan struct{} // closed by Close: reportCatchUp returns
	reported    chan struct{} // closed when reportCatchUp returned
	unsubscribe func()        // ends logChange
	closeOnce   sync.Once
	closeErr    error
}

// OpenParticipant opens this node's part in the cluster over its data
// directory, which must be this node's of this cluster, or new
// (participant_identity.go). It connects to etcd and reads the cluster's
// records, retrying while etcd cannot be reached (a node that cannot read
// them cannot know what it owns) until ctx ends, and returns once its
// replica caught up, so the node's startup sweeps and opens see every
// record etcd held. Nothing is registered before Join.
func OpenParticipant(ctx context.Context, cfg ParticipantConfig) (*Participant, error) {
	if cfg.Transfer == nil {
		return nil, errors.New("cluster: a participant needs a Transfer")
	}
	if cfg.FS == nil {
		cfg.FS = vfs.OS{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	id, stored, err := chooseNodeID(cfg.FS, cfg.DataDir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	p, err := openEtcd(ctx, cfg.Endpoints, id, cfg.Logger)
	if err != nil {
		return nil, err
	}
	p.transfer, p.ttl, p.fenceAfter = cfg.Transfer, cfg.MemberTTL, cfg.FenceAfter
	if err := p.checkIdentity(ctx, cfg.FS, cfg.DataDir, stored); err != nil {
		p.Close(context.Background()) // not joined: nothing to leave
		return nil, err
	}
	return p, nil
}

// openEtcd connects to etcd and opens the metastore on it (retrying as
// OpenParticipant says), then waits until the replica is caught up.
func openEtcd(ctx context.Context, endpoints []string, id string, logger *zap.Logger) (*Participant, error) {
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
	p := &Participant{id: id, cli: cli, logger: logger, stop: make(chan struct{}), reported: make(chan struct{})}
	for attempt := 0; ; attempt++ {
		openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		p.ms, err = OpenEtcdMetastore(openCtx, Config{Client: cli, NodeID: id, Logger: logger.Named("metastore")})
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
		changed := p.ms.CaughtUpChanged()
		if p.ms.CaughtUp() {
			logger.Info("metastore caught up with etcd", zap.String("node_id", id))
			go p.reportCatchUp()
			p.unsubscribe = p.ms.Subscribe(p.logChange)
			return p, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			close(p.reported)
			p.Close(context.Background()) // not joined: nothing to leave
			return nil, ctx.Err()
		}
	}
}

// logChange logs, at debug, each topic record this node's replica
// applies: when a node learned of a change.
func (p *Participant) logChange(topic string) {
	rec, ok, _ := p.ms.Topic(context.Background(), topic)
	owned := 0
	for i := range rec.Partitions {
		if _, has := p.ms.Locate(topic, i); has {
			owned++
		}
	}
	p.logger.Debug("topic record applied", zap.String("topic", topic), zap.Bool("exists", ok),
		zap.String("incarnation", string(rec.Incarnation)), zap.Uint64("version", rec.Version), zap.Int("partitions_with_owner", owned))
}

// reportCatchUp logs each change of the replica's catch-up with etcd
// until Close: behind, the node serves what it owns from what it last
// read, and its changes wait for etcd.
func (p *Participant) reportCatchUp() {
	defer close(p.reported)
	caughtUp := true
	for {
		changed := p.ms.CaughtUpChanged()
		if now := p.ms.CaughtUp(); now != caughtUp {
			caughtUp = now
			if now {
				p.logger.Info("metastore caught up with etcd")
			} else {
				p.logger.Warn("metastore behind etcd (unreachable, or slow): serving the partitions this node owns from its last reading")
			}
		}
		select {
		case <-changed:
		case <-p.stop:
			return
		}
	}
}

// ID is this node's id in the cluster.
func (p *Participant) ID() string { return p.id }

// Metastore is the cluster's records as this node follows them: the
// runtime.Metastore its node opens on, and the moves, members and marks
// an operator's calls change.
func (p *Participant) Metastore() *EtcdMetastore { return p.ms }

// Attach gives the participant the node it serves the cluster's
// partitions with, opened on Metastore(): once, before Join and before
// any move call.
func (p *Participant) Attach(node *runtime.Node) { p.node = node }

// Locate says where the replica says a partition is served
// (EtcdMetastore.Locate).
func (p *Participant) Locate(topic string, partition int) (Location, bool) {
	return p.ms.Locate(topic, partition)
}

// Settle brings the replica up to etcd and waits, until ctx ends, for
// the partition to have an owner (EtcdMetastore.Settle).
func (p *Participant) Settle(ctx context.Context, topic string, partition int) bool {
	return p.ms.Settle(ctx, topic, partition)
}

// Close stops the mover (StopMover), leaves the cluster (no etcd call it
// makes or waits for outlasts ctx: a stop's deadline), and stops
// following etcd; after the node is closed. A candidacy whose end the
// leave did not see ends once the client is closed, and Close waits for
// it then (at once). Every call returns the first one's outcome.
func (p *Participant) Close(ctx context.Context) error {
	p.closeOnce.Do(func() { p.closeErr = p.close(ctx) })
	return p.closeErr
}

func (p *Participant) close(ctx context.Context) error {
	p.StopMover()
	close(p.stop)
	<-p.reported
	if p.unsubscribe != nil {
		p.unsubscribe()
	}
	err := p.leave(ctx)
	if p.ms != nil {
		err = errors.Join(err, p.ms.Close())
	}
	err = errors.Join(err, p.cli.Close())
	if p.assigner != nil {
		p.assigner.Stop(context.Background())
	}
	return err
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
