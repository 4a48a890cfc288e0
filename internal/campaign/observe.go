package campaign

import (
	"context"
	"errors"
	"fmt"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs/sim"
)

// An observation is what a fresh node started on a disk serves: the
// topic's incarnation, the log's bounds, every offset read back (and
// whether its bytes were the ones produced there) and the consumer state.
type observation struct {
	found      bool // the topic exists
	gen        int  // the model's incarnation it is (1-based); 0 unknown
	start, hwm int64
	served     map[int64]bool // offsets served with the bytes produced there
	wrong      []int64        // offsets served with other bytes (I1)
	unreadable map[int64]bool // offsets a read reported as a gap or failed on
	frontier   int64
	ahead      []int64
}

// observe starts a node on d, reads everything below the high watermark
// (stepping over gaps and, with skip, over offsets a read fails on) and
// closes it, running then (when not nil) on the node before the close.
// The model names the incarnations, so each record is checked against the
// bytes of its own.
func observe(ctx context.Context, d *sim.Disk, m Model, seed uint64, skip func(offset int64) int64,
	then func(*runtime.Node, observation) error) (obs observation, err error) {
	n, err := startNode(ctx, d, codecOf(m.Phase), false, seed)
	if err != nil {
		return obs, fmt.Errorf("start: %w (I2)", err)
	}
	defer func() {
		if cerr := n.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	rec, _, err := n.Describe(ctx, Topic)
	if errors.Is(err, runtime.ErrTopicNotFound) {
		return obs, nil
	}
	if err != nil {
		return obs, fmt.Errorf("describe: %w", err)
	}
	obs.found = true
	for i, g := range m.Gens {
		if g.Incarnation == rec.Incarnation {
			obs.gen = i + 1
		}
	}
	if obs.gen == 0 && len(m.Gens) > 0 && m.current().Incarnation == "" {
		obs.gen = len(m.Gens) // the create in flight made it
	}
	l, err := n.Log(ctx, Topic, 0)
	if err != nil {
		return obs, fmt.Errorf("open: %w (I2)", err)
	}
	obs.start, obs.hwm = l.StartOffset(), l.HighWatermark()
	obs.served, obs.unreadable = map[int64]bool{}, map[int64]bool{}
	for offset := obs.start; offset < obs.hwm; {
		res, err := n.Read(ctx, Topic, 0, offset, 1000, 8<<20)
		var gap *partition.UnreadableError
		switch {
		case errors.As(err, &gap):
			for o := offset; o < gap.Next; o++ {
				obs.unreadable[o] = true
			}
			if gap.Next <= offset {
				return obs, fmt.Errorf("a gap at %d says the next offset is %d (I8)", offset, gap.Next)
			}
			offset = gap.Next
			continue
		case err != nil && skip != nil:
			obs.unreadable[offset] = true
			offset = skip(offset)
			continue
		case err != nil:
			return obs, fmt.Errorf("read at %d of [%d, %d): %w", offset, obs.start, obs.hwm, err)
		}
		for _, r := range res.Records {
			if obs.gen == 0 && m.metaLost() {
				// Lying fsyncs took the record's incarnation (the records
				// were rebuilt from the directories): the first record
				// served says which incarnation the directory is, and
				// every other must agree.
				for g := range m.Gens {
					if string(r.Value) == string(Value(seed, g+1, r.Offset)) {
						obs.gen = g + 1
					}
				}
			}
			if obs.gen > 0 && string(r.Value) == string(Value(seed, obs.gen, r.Offset)) {
				obs.served[r.Offset] = true
			} else {
				obs.wrong = append(obs.wrong, r.Offset)
			}
		}
		if res.Next <= offset {
			return obs, fmt.Errorf("a read at %d returned next %d", offset, res.Next)
		}
		offset = res.Next
	}
	st, err := n.ConsumerState(ctx, Topic, 0)
	if err != nil {
		return obs, fmt.Errorf("consumer state: %w", err)
	}
	obs.frontier, obs.ahead = st.Frontier, st.AckedAhead
	if then != nil {
		return obs, then(n, obs)
	}
	return obs, nil
}

// checkAgainst checks an observation against the model: the invariants a
// crash, a lie or a failed call may never break. honest says whether every
// offset of a returned commit must be served (I4): not for an image whose
// torn sectors hold garbage, which destroys synced bytes sharing a sector.
func checkAgainst(obs observation, m Model, honest bool) error {
	if !obs.found {
		if len(m.Gens) == 0 {
			return nil
		}
		if g := m.current(); g.Incarnation != "" && !g.Deleting && !m.metaLost() {
			return fmt.Errorf("topic gone, though its create returned and no delete was called")
		}
		return nil
	}
	if obs.gen == 0 && m.metaLost() && len(obs.wrong) == 0 {
		return nil // an incarnation lost to lies, serving nothing: nothing to hold it to
	}
	if obs.gen == 0 {
		return fmt.Errorf("the topic is an incarnation the workload never made (I1)")
	}
	g := m.Gens[obs.gen-1]
	if g.Deleted && !m.metaLost() {
		return fmt.Errorf("incarnation %d is served after its delete returned", obs.gen)
	}
	if obs.gen < len(m.Gens) && m.Gens[obs.gen].Incarnation != "" && !m.metaLost() {
		return fmt.Errorf("incarnation %d is served after incarnation %d was created", obs.gen, obs.gen+1)
	}
	if len(obs.wrong) > 0 {
		return fmt.Errorf("offset %d holds bytes never produced there (I1)", obs.wrong[0])
	}
	if obs.hwm > g.Written {
		return fmt.Errorf("high watermark %d above anything written, %d (I5)", obs.hwm, g.Written)
	}
	if honest && !(g.Deleting && m.metaLost()) { // lies may have brought a deleted record back
		// Retention may have moved the start past committed offsets; from
		// there up, every honest commit is served.
		for o := obs.start; o < g.Honest; o++ {
			if !obs.served[o] {
				return fmt.Errorf("offset %d of an honest commit (below %d) not served; [%d, %d) held (I4)", o, g.Honest, obs.start, obs.hwm)
			}
		}
	}
	for o := int64(0); o < obs.frontier; o++ {
		if !g.Consumed[o] {
			return fmt.Errorf("consumer frontier %d passes unacked offset %d (I9)", obs.frontier, o)
		}
	}
	for _, o := range obs.ahead {
		if !g.Consumed[o] {
			return fmt.Errorf("consumer acked-ahead set holds unacked offset %d (I9)", o)
		}
	}
	return nil
}

// sameOffsets reports whether two sets of offsets are equal.
func sameOffsets(a, b map[int64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for o := range a {
		if !b[o] {
			return false
		}
	}
	return true
}
