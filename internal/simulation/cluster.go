package simulation

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
)

// A cluster run: two or three members, each a runtime.Node on a simulated
// disk of its own, in the run's one bubble, sharing a metastore
// (cluster_meta.go) that says which member owns each partition. Its
// topics have one partition each, so every operation on a topic goes to
// one member, its partition's owner (on), and the single-node operations
// run unchanged there. Besides them it moves partitions between members,
// drains a member, and marks one lost (ops_move.go).
//
// The moves use the node's own primitives, the ones package cluster's
// pull drives (runtime.Node.TransferListing, OpenTransferFile,
// FreezePartition, ReceivePartition, DropPartition, SetAsidePartition),
// the files copied in memory: no etcd, no consensus, no network, no
// concurrent pull. What package cluster adds on top (the move records'
// states, cancels, the assigner, fencing) is not simulated.

// clusterEvery: one run in clusterEvery is a cluster run (clusterRun).
// clusterSalt makes its source: 2 leaves the runs of seed 1 that
// docs/durability.md and the replay tests name single-node runs.
const (
	clusterEvery = 8
	clusterSalt  = 2
)

// clusterRun reports whether run of seed is a cluster run, drawn from a
// source of its own so the single-node runs are what they were before
// cluster runs existed.
func clusterRun(seed uint64, run int) bool {
	return rand.New(rand.NewPCG(seed^clusterSalt, uint64(run))).IntN(clusterEvery) == 0
}

// member is one node of a cluster run.
//
// Invariants: n is nil only between a close and the next start; lost
// members are in cluster.gone, never in cluster.members.
type member struct {
	id string
	d  *sim.Disk
	n  *runtime.Node
}

// cluster is a cluster run's members and shared metastore.
type cluster struct {
	meta    *clusterMeta
	members []*member // live, in the order they joined
	gone    []*member // marked lost, their disks kept
	cur     *member   // the member the runner's node and disk are
	next    int       // the next member id's number
}

// newCluster makes a cluster run's members, each with a fresh disk.
func (r *runner) newCluster() {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], r.rng.Uint64())
	r.feed = &feed{}
	r.cl = &cluster{meta: newClusterMeta(rand.NewChaCha8(key), r.feed)}
	r.res.Live.ClusterRuns++
	for range 2 + r.rng.IntN(2) {
		// Each member starts on an instant of its own (settle moves the
		// clock a nanosecond): the loops of two nodes started together
		// would tick together, in an order the scheduler picks.
		r.settle()
		r.join(r.newMember())
	}
}

// newMember makes a member of a fresh id on a fresh disk.
func (r *runner) newMember() *member {
	m := &member{id: fmt.Sprintf("m%d", r.cl.next), d: sim.NewDisk(r.rng.Uint64())}
	r.cl.next++
	r.trace.attach(m.d)
	return m
}

// join starts m's node and makes it a live member.
func (r *runner) join(m *member) {
	r.cl.members = append(r.cl.members, m)
	r.use(m)
	r.start()
}

// use makes m the member the runner's node and disk are.
func (r *runner) use(m *member) { r.cl.cur, r.n, r.d = m, m.n, m.d }

// on routes the calls that follow to the owner of t's partition (a
// no-op in a single-node run).
func (r *runner) on(t *topicModel) {
	if r.cl == nil {
		return
	}
	id := r.cl.meta.ownerOf(t.name, 0)
	m := r.cl.member(id)
	if m == nil {
		r.failf("%s/0: owned by %q, no live member", t.name, id)
	}
	r.use(m)
}

// member is the live member of id, nil if none.
func (c *cluster) member(id string) *member {
	for _, m := range c.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// owned lists the run's topics m owns, in the run's order.
func (r *runner) owned(m *member) []*topicModel {
	var out []*topicModel
	for _, t := range r.topics {
		if r.cl.meta.ownerOf(t.name, 0) == m.id {
			out = append(out, t)
		}
	}
	return out
}

// onMember runs f with the run's topics narrowed to those m owns and m the
// runner's node: a restart or a crash of one member checks what it owns.
func (r *runner) onMember(m *member, f func()) {
	all := r.topics
	r.topics = r.owned(m)
	r.use(m)
	defer func() { r.topics = all }()
	f()
}

// startMember is start's for a member: its node on its disk, the shared
// metastore seen as m.
func (r *runner) startMember() *runtime.Node {
	m := r.cl.cur
	m.d = r.d
	n, err := runtime.New(r.nodeConfig(memberMeta{r.cl.meta, m.id}))
	r.must("new node "+m.id, err)
	if err := n.Start(r.ctx); err != nil {
		n.Close()
		r.must("start node "+m.id, err)
	}
	m.n = n
	return n
}

// closeMembers closes every member's node at the run's end.
func (r *runner) closeMembers() {
	for _, m := range slices.Concat(r.cl.members, r.cl.gone) {
		if m.n != nil {
			m.n.Close()
			m.n = nil
		}
	}
	r.n = nil
	for _, m := range slices.Concat(r.cl.members, r.cl.gone) {
		m.d.SetHook(nil)
		r.trace.disk(m.d)
	}
}

// clusterStep draws one operation of a cluster run and runs it: the
// single-node operations on one topic (each on the owner of its
// partition), a restart or a crash of one member, and the moves.
func (r *runner) clusterStep() {
	weights := []struct {
		w int
		f func()
	}{
		{25, r.produce}, {10, r.read}, {14, r.consume}, {12, r.ack}, {5, r.nack}, {8, r.extend},
		{8, r.pause}, {2, r.drain}, {4, r.checkConsumers},
		{3, r.cursorCreate}, {5, r.cursorRead}, {3, r.cursorCommit}, {1, r.cursorDelete}, {2, r.cursorCheck},
		{2, r.restartMember}, {2, r.crashMember},
		{8, r.move}, {2, r.drainMember}, {2, r.loseMember}, {3, r.faultWriteOut},
		{1, r.bigAck}, // an acked set over a slot: consumer.acked, which a move carries
	}
	total := 0
	for _, w := range weights {
		total += w.w
	}
	x := r.rng.IntN(total)
	for _, w := range weights {
		if x < w.w {
			w.f()
			return
		}
		x -= w.w
	}
}

// pickMember draws one of the live members.
func (r *runner) pickMember() *member { return r.cl.members[r.rng.IntN(len(r.cl.members))] }

// restartMember closes one member's node cleanly and starts it again.
func (r *runner) restartMember() {
	m := r.pickMember()
	r.logf("member %s:", m.id)
	r.onMember(m, r.restart)
}

// crashMember crashes one member's node and starts a new one on the image.
func (r *runner) crashMember() {
	m := r.pickMember()
	r.logf("member %s:", m.id)
	r.onMember(m, r.crash)
}
