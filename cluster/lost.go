package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/narad-io/storage/datadir"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A node that is gone for good (its machine or its disk lost) keeps its
// partitions until an operator marks it lost: lost/<id> in etcd. The
// elected assigner then gives each of its partitions to a live node,
// empty: only the lost node's disk held their records, and a partition
// that no node serves takes no writes at all. Four rules keep a node
// that was marked lost while alive (cut off from etcd, not dead) from
// serving a partition another node serves, or from losing what it acked:
//
//   - the mark is written only while the node has no member key (its
//     lease ran out: it has not reached etcd for its member TTL);
//   - the assigner reassigns a lost node's partitions only once it has
//     itself seen the mark (so the node absent) for the longer of its own
//     fence horizon and the node's, which the node's last registration
//     wrote to fence/<id> (a node without one keeps its partitions): a
//     node stops serving (Member.Serving) once that long has passed since
//     the last lease renewal it sent that etcd answered, which is before
//     its lease could run out, so before any reassignment;
//   - a node completes a move onto itself only while registered and not
//     marked (CompleteMove), and a pull never installs over a partition
//     assigned to the node before or since its receive began
//     (runtime.Receiver): a partition given to a node that was pulling it
//     stays what it acked;
//   - a node marked lost never registers while the mark is there: it sets
//     its copies of the partitions other nodes now own aside (never drops
//     them: they may hold records it acked that the new owner never had),
//     then clears the mark (ResolveLost), in a transaction that fails if
//     any assignment changed since it read them, and only then registers.

// ErrNodeLost: the node is marked lost; it does not register until it
// has set its reassigned copies aside and cleared the mark (ResolveLost).
var ErrNodeLost = errors.New("cluster: the node is marked lost")

// LostMark is lost/<id>'s value.
type LostMark struct {
	MarkedAtMs int64 `json:"marked_at_ms"` // the marking node's clock, for people
}

// ErrUnknownNode: no node ever registered under the id (a mistyped id),
// so nothing says when it would stop serving: it is not marked lost.
var ErrUnknownNode = errors.New("cluster: no node registered under the id")

// MarkLost marks node id lost, so the assigner gives its partitions to
// live nodes (empty: their records were on its disk only) once its fence
// horizon has passed. Refused while the node is a live member
// (ErrNodeIDLive) and for an id no node registered under (ErrUnknownNode:
// it has no fence horizon in etcd); marking a node already marked is
// nothing to do.
func (m *EtcdMetastore) MarkLost(ctx context.Context, id string, now time.Time) error {
	if err := datadir.ValidateNodeID(id); err != nil {
		return err
	}
	val, err := json.Marshal(LostMark{MarkedAtMs: now.UnixMilli()})
	if err != nil {
		return err
	}
	member, lost, fence := m.keys.member(id), m.keys.lost(id), m.keys.fence(id)
	resp, err := m.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(member), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(lost), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(fence), ">", 0),
	).Then(clientv3.OpPut(lost, string(val))).Else(clientv3.OpGet(member), clientv3.OpGet(fence, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return fmt.Errorf("cluster: mark node %s lost: %w", id, err)
	}
	if !resp.Succeeded {
		switch {
		case len(resp.Responses[0].GetResponseRange().Kvs) > 0:
			return fmt.Errorf("%w: %s: only a node that is not live can be marked lost", ErrNodeIDLive, id)
		case resp.Responses[1].GetResponseRange().Count == 0:
			return fmt.Errorf("%w: %s", ErrUnknownNode, id)
		}
		return nil // marked already
	}
	return m.waitApplied(ctx, resp.Header.Revision)
}

// LostNodes lists the nodes marked lost whose marks are not cleared yet,
// as the replica knows them.
func (m *EtcdMetastore) LostNodes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.lost))
	for id := range m.lost {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// ResolveLost is this node's, before it registers: when it is marked
// lost, it reads the assignment (linearizably), calls setAside with the
// topics it names (read from etcd, not the replica, which may lag), which
// must set aside every copy this node holds of a partition of those
// topics that owned reports is not its, and then clears the mark, unless
// an assignment changed since the read (the assigner reassigned another
// partition meanwhile: it reads and sets aside again). It reports whether
// there was a mark.
func (m *EtcdMetastore) ResolveLost(ctx context.Context, setAside func(ctx context.Context, topics []string, owned func(topic string, p int) bool) error) (bool, error) {
	lost, assignPrefix := m.keys.lost(m.nodeID), m.keys.root+"assign/"
	for {
		read, err := m.cli.Txn(ctx).Then(clientv3.OpGet(lost), clientv3.OpGet(assignPrefix, clientv3.WithPrefix())).Commit()
		if err != nil {
			return false, fmt.Errorf("cluster: read node %s's lost mark: %w", m.nodeID, err)
		}
		marks := read.Responses[0].GetResponseRange().Kvs
		if len(marks) == 0 {
			return false, nil
		}
		mine, named := map[partitionKey]bool{}, map[string]bool{}
		var topics []string
		for _, kv := range read.Responses[1].GetResponseRange().Kvs {
			kind, name, p := m.keys.parse(string(kv.Key))
			if kind != keyAssignment {
				continue
			}
			if !named[name] {
				named[name] = true
				topics = append(topics, name)
			}
			if string(kv.Value) == m.nodeID {
				mine[partitionKey{name, p}] = true
			}
		}
		if err := setAside(ctx, topics, func(topic string, p int) bool { return mine[partitionKey{topic, p}] }); err != nil {
			return true, err
		}
		rev := read.Header.Revision
		clear, err := m.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(lost), "=", marks[0].ModRevision),
			clientv3.Compare(clientv3.ModRevision(assignPrefix), "<", rev+1).WithPrefix(),
		).Then(clientv3.OpDelete(lost)).Commit()
		if err != nil {
			return true, fmt.Errorf("cluster: clear node %s's lost mark: %w", m.nodeID, err)
		}
		if clear.Succeeded {
			return true, m.waitApplied(ctx, clear.Header.Revision)
		}
	}
}
