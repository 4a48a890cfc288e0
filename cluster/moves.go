package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A move gives a partition a new owner while its old owner is up: the new
// owner pulls the partition's files from the old one and installs them,
// then the assignment is switched. Its record, moves/<topic>/<p>, goes
// through these states, each change one transaction conditional on the
// record being the one the changer read (its mod revision), so of two
// racing changes one wins:
//
//	requested  an operator asked (RequestMove); the old owner serves on
//	frozen     the old owner stopped serving the partition (FreezeMove):
//	           its replica no longer says it owns it, its log is closed,
//	           and its files, final, are listed for the new owner
//	(gone)     CompleteMove: the assignment names the new owner, in the
//	           same transaction that deletes the record; or CancelMove:
//	           the old owner owns and serves the partition again
//
// So a partition is never served by two nodes: the old owner stops before
// it lists its final files, and serves again only once a cancel won, after
// which no completion can; the new owner serves only once its completion
// won, after which no cancel can. A frozen move whose new owner went
// quiet is cancelled by the old owner (its mover), so the partition is
// never left unserved for good.

// Move is a partition move's record.
type Move struct {
	ID          string             `json:"id"`
	Topic       string             `json:"topic"`
	Partition   int                `json:"partition"`
	From        string             `json:"from"`
	To          string             `json:"to"`
	Incarnation wire.IncarnationID `json:"incarnation"`
	State       string             `json:"state"`                  // MoveRequested or MoveFrozen
	FrozenAtMs  int64              `json:"frozen_at_ms,omitempty"` // when the old owner froze it, by its clock
	// Rev is the record's mod revision in etcd: a change is made against
	// it. Never stored in the record itself; carried with it elsewhere (a
	// move's freeze answer).
	Rev int64 `json:"rev,omitempty"`
}

// encode is the record as stored: without its revision.
func (mv Move) encode() (string, error) {
	mv.Rev = 0
	b, err := json.Marshal(mv)
	return string(b), err
}

// The states of a move's record.
const (
	MoveRequested = "requested"
	MoveFrozen    = "frozen"
)

// ErrMoveChanged: the move's record is not the one the change was made
// against (another change won, or the move is gone).
var ErrMoveChanged = errors.New("cluster: the move's record changed")

// ErrMoveRefused: a move that cannot be asked for (no such partition, no
// owner yet, the new owner not a live member, a move already under way).
var ErrMoveRefused = errors.New("cluster: move refused")

// RequestMove asks for partition p of topic to move to node to, a live
// member other than its owner. The record names the topic's incarnation;
// a partition with a move under way refuses another.
func (m *EtcdMetastore) RequestMove(ctx context.Context, topic string, p int, to string) (Move, error) {
	m.mu.Lock()
	rec, known := m.topics[topic]
	from, owned := m.owners[partitionKey{topic, p}]
	_, live := m.members[to]
	m.mu.Unlock()
	switch {
	case !known || p < 0 || p >= rec.Partitions:
		return Move{}, fmt.Errorf("%w: %w: %s/%d", ErrMoveRefused, runtime.ErrPartitionNotFound, topic, p)
	case !owned:
		return Move{}, fmt.Errorf("%w: %s/%d has no owner yet", ErrMoveRefused, topic, p)
	case from == to:
		return Move{}, fmt.Errorf("%w: %s/%d is node %s's already", ErrMoveRefused, topic, p, to)
	case !live:
		return Move{}, fmt.Errorf("%w: node %q is not a live member", ErrMoveRefused, to)
	}
	var r [8]byte
	rand.Read(r[:])
	mv := Move{ID: hex.EncodeToString(r[:]), Topic: topic, Partition: p, From: from, To: to, Incarnation: rec.Incarnation, State: MoveRequested}
	val, err := mv.encode()
	if err != nil {
		return Move{}, err
	}
	key, assign := m.keys.move(topic, p), m.keys.assignment(topic, p)
	resp, err := m.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		clientv3.Compare(clientv3.Value(assign), "=", from),
		clientv3.Compare(clientv3.ModRevision(m.keys.topic(topic)), "=", int64(rec.Version)),
	).Then(clientv3.OpPut(key, val)).Commit()
	if err != nil {
		return Move{}, fmt.Errorf("cluster: request a move of %s/%d: %w", topic, p, err)
	}
	if !resp.Succeeded {
		return Move{}, fmt.Errorf("%w: %s/%d has a move under way, or changed meanwhile", ErrMoveRefused, topic, p)
	}
	mv.Rev = resp.Header.Revision
	return mv, m.waitApplied(ctx, resp.Header.Revision)
}

// FreezeMove is the old owner's: the requested move mv becomes frozen, and
// once this returns the replica no longer reports the partition assigned
// to this node (Assigned), so no open of it is admitted here.
func (m *EtcdMetastore) FreezeMove(ctx context.Context, mv Move, now time.Time) (Move, error) {
	if mv.State != MoveRequested || mv.From != m.nodeID {
		return Move{}, fmt.Errorf("%w: freezing %+v on node %s", ErrMoveChanged, mv, m.nodeID)
	}
	frozen := mv
	frozen.State, frozen.FrozenAtMs = MoveFrozen, now.UnixMilli()
	rev, err := m.swapMove(ctx, mv, &frozen, nil)
	frozen.Rev = rev
	return frozen, err
}

// CompleteMove is the new owner's, once it installed the partition: the
// assignment names it, and the frozen move's record goes, in one
// transaction, which also needs this node registered and not marked lost
// (a node cut off while it pulled must not take a live node's partition
// into a copy it will set aside: found by review).
func (m *EtcdMetastore) CompleteMove(ctx context.Context, mv Move) error {
	if mv.State != MoveFrozen || mv.To != m.nodeID {
		return fmt.Errorf("%w: completing a move in state %q to %s on node %s", ErrMoveChanged, mv.State, mv.To, m.nodeID)
	}
	assign := m.keys.assignment(mv.Topic, mv.Partition)
	_, err := m.swapMove(ctx, mv, nil, []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(assign), "=", mv.From),
		clientv3.Compare(clientv3.CreateRevision(m.keys.member(m.nodeID)), ">", 0),
		clientv3.Compare(clientv3.CreateRevision(m.keys.lost(m.nodeID)), "=", 0),
	}, clientv3.OpPut(assign, mv.To))
	return err
}

// CancelMove ends the move mv without moving anything: its record goes,
// and a frozen partition is its old owner's to serve again.
func (m *EtcdMetastore) CancelMove(ctx context.Context, mv Move) error {
	_, err := m.swapMove(ctx, mv, nil, nil)
	return err
}

// swapMove replaces the move record that is mv (the same id, at the same
// mod revision) with next (nil: deletes it), with ops and under cmps
// besides, and waits for the replica to apply it; it returns the
// revision of the change.
func (m *EtcdMetastore) swapMove(ctx context.Context, mv Move, next *Move, cmps []clientv3.Cmp, ops ...clientv3.Op) (int64, error) {
	if mv.Rev <= 0 {
		return 0, fmt.Errorf("%w: move %s of %s/%d carries no revision", ErrMoveChanged, mv.ID, mv.Topic, mv.Partition)
	}
	key := m.keys.move(mv.Topic, mv.Partition)
	if next != nil {
		val, err := next.encode()
		if err != nil {
			return 0, err
		}
		ops = append(ops, clientv3.OpPut(key, val))
	} else {
		ops = append(ops, clientv3.OpDelete(key))
	}
	cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", mv.Rev))
	resp, err := m.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("cluster: move %s of %s/%d: %w", mv.ID, mv.Topic, mv.Partition, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: move %s of %s/%d", ErrMoveChanged, mv.ID, mv.Topic, mv.Partition)
	}
	return resp.Header.Revision, m.waitApplied(ctx, resp.Header.Revision)
}

// Moves lists the moves under way, as the replica holds them, by topic
// and partition.
func (m *EtcdMetastore) Moves() []Move {
	m.mu.Lock()
	out := make([]Move, 0, len(m.moves))
	for _, mv := range m.moves {
		out = append(out, mv)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// FindMove returns the move under way whose id is id. One the replica
// does not hold is looked for again once the replica has caught up with
// etcd (CatchUp), until ctx ends: each node follows etcd on its own
// watch, so a move's new owner may see the move, and ask its old owner
// for it, before the old owner's replica has it (found in a trial: the
// old owner answered "no such move", and the move waited out the
// mover's pause). ok is false when etcd held no such move either.
func (m *EtcdMetastore) FindMove(ctx context.Context, id string) (mv Move, ok bool, err error) {
	if mv, ok := m.moveByID(id); ok {
		return mv, true, nil
	}
	m.logger.Debug("a move not in this node's replica yet: catching up with etcd", zap.String("move", id))
	if err := m.CatchUp(ctx); err != nil {
		return Move{}, false, err
	}
	mv, ok = m.moveByID(id)
	return mv, ok, nil
}

// moveByID finds a move under way by its id, in the replica.
func (m *EtcdMetastore) moveByID(id string) (Move, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mv := range m.moves {
		if mv.ID == id {
			return mv, true
		}
	}
	return Move{}, false
}

// ConfirmOwner reads a partition's owner from etcd, linearizably (never
// the replica): what a node checks before it removes its copy of a
// partition it no longer owns. A node marked lost confirms nothing
// (ErrNodeLost): a partition reassigned from it holds records only its
// copy has, which ResolveLost sets aside, never drops.
func (m *EtcdMetastore) ConfirmOwner(ctx context.Context, topic string, p int) (owner string, ok bool, err error) {
	resp, err := m.cli.Txn(ctx).Then(clientv3.OpGet(m.keys.assignment(topic, p)), clientv3.OpGet(m.keys.lost(m.nodeID))).Commit()
	if err != nil {
		return "", false, fmt.Errorf("cluster: read the owner of %s/%d: %w", topic, p, err)
	}
	if len(resp.Responses[1].GetResponseRange().Kvs) > 0 {
		return "", false, fmt.Errorf("%w: %s: its copy of %s/%d is set aside, not dropped", ErrNodeLost, m.nodeID, topic, p)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return "", false, nil
	}
	return string(kvs[0].Value), true, nil
}

// Node is a live member as the replica knows it.
type Node struct {
	MemberInfo
	Draining   bool `json:"draining"`   // its partitions move off, and it gets no new ones
	Partitions int  `json:"partitions"` // the partitions it owns
}

// Nodes lists the live members, by id.
func (m *EtcdMetastore) Nodes() []Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	owned := map[string]int{}
	for _, o := range m.owners {
		owned[o]++
	}
	out := make([]Node, 0, len(m.members))
	for id, info := range m.members {
		out = append(out, Node{MemberInfo: info, Draining: m.drains[id], Partitions: owned[id]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SetDraining marks node id draining (or no longer): the assigner moves
// every partition it owns to the other live members and gives it no new
// ones (or, undrained, gives it its share again). A node needs not be
// live to be marked.
func (m *EtcdMetastore) SetDraining(ctx context.Context, id string, draining bool) error {
	if err := datadir.ValidateNodeID(id); err != nil {
		return err
	}
	var err error
	var resp *clientv3.PutResponse
	var del *clientv3.DeleteResponse
	rev := int64(0)
	if draining {
		resp, err = m.cli.Put(ctx, m.keys.drain(id), "")
		if err == nil {
			rev = resp.Header.Revision
		}
	} else {
		del, err = m.cli.Delete(ctx, m.keys.drain(id))
		if err == nil {
			rev = del.Header.Revision
		}
	}
	if err != nil {
		return fmt.Errorf("cluster: mark node %s draining=%v: %w", id, draining, err)
	}
	return m.waitApplied(ctx, rev)
}
