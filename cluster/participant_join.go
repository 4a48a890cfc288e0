package cluster

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// Join registers the node at addr (the address other nodes and clients
// reach it at), starts its candidacy for assigning, and starts its mover;
// after the node's Start, so a node serves only what it opened. A node
// marked lost first sets aside its copies of the partitions other nodes
// now own (setAsideReassigned) and clears its mark; so does it when its
// lease ran out and it finds itself marked on registering again. Until
// Join registered it, the node is not Serving.
func (p *Participant) Join(ctx context.Context, addr string) error {
	if p.node == nil {
		return errors.New("cluster: join before a node was attached")
	}
	member, err := JoinCluster(ctx, MemberConfig{
		Client: p.cli, Info: MemberInfo{ID: p.id, Addr: addr}, TTL: p.ttl, FenceAfter: p.fenceAfter, Logger: p.logger.Named("member"),
		OnLost: func(ctx context.Context) error {
			_, err := p.ms.ResolveLost(ctx, p.setAsideReassigned)
			return err
		},
	})
	if err != nil {
		return fmt.Errorf("join the cluster: %w", err)
	}
	p.member.Store(member)
	p.assigner, err = StartAssigner(AssignerConfig{Client: p.cli, NodeID: p.id, TTL: p.ttl, FenceAfter: p.fenceAfter, Logger: p.logger.Named("assigner")})
	if err != nil {
		return fmt.Errorf("start the assigner: %w", err)
	}
	p.logger.Info("joined the cluster", zap.String("node_id", p.id), zap.String("advertise_addr", addr))
	p.mover = startMover(p)
	return nil
}

// setAsideReassigned sets aside (never drops) this node's copy of every
// partition of topics that owned says is not its: what a node marked lost
// holds of the partitions given away may be records no other node has.
func (p *Participant) setAsideReassigned(ctx context.Context, topics []string, owned func(string, int) bool) error {
	for _, topic := range topics {
		dirs, err := p.node.PartitionDirs(topic)
		if err != nil {
			return err
		}
		for _, part := range dirs {
			if owned(topic, part) {
				continue
			}
			unlock := p.locks.lock(topic, part)
			_, err := p.node.SetAsidePartition(ctx, topic, part)
			unlock()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Serving reports whether this node serves its partitions: registered,
// with its lease renewed within the fence horizon (Member.Serving).
func (p *Participant) Serving() bool {
	m := p.member.Load()
	return m != nil && m.Serving()
}

// Registration numbers this node's registration (Member.Registration): a
// call served under one and the same registration throughout sees it
// unchanged. 0 before Join.
func (p *Participant) Registration() uint64 {
	if m := p.member.Load(); m != nil {
		return m.Registration()
	}
	return 0
}

// StopMover stops the mover and waits for its pulls (their calls end with
// its context; a pull cut short leaves its move to be taken up again):
// before the node closes, so no pull runs into a closing node. Nothing
// before Join; nothing more the second time.
func (p *Participant) StopMover() {
	if p.mover != nil {
		p.mover.close()
	}
}

// leave ends the candidacy and the registration (the lease revoked, so
// the others see the node go at once); its partitions stay its. No etcd
// call it makes or waits for outlasts ctx (a stop's deadline).
func (p *Participant) leave(ctx context.Context) error {
	var err error
	if p.assigner != nil {
		err = p.assigner.Stop(ctx)
	}
	if m := p.member.Swap(nil); m != nil {
		err = errors.Join(err, m.Leave(ctx))
	}
	return err
}
