package simulation

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// The model: what the node has promised, per topic and partition. It is
// updated only from answers that returned, so it says at every point what
// must be true (docs/durability.md, "The simulator").
//
// Invariants of the model itself: committed grows by the records of each
// produce that returned; acked holds only offsets whose ack returned (after
// a crash, only those the node still holds: the contract lets a crash take
// back the acks of the last write-out window); leases holds only leases
// given by a consume that returned and neither acked, nacked nor
// reclaimed by a restart.

// topicModel is one topic's current incarnation.
type topicModel struct {
	name        string
	gen         int    // 1 for the first create of the name in the run, then 2, ...
	incarnation string // as the node answered its create
	parts       []*partModel
	retMs       int64 // the retention bounds as the last change that returned set them
	retBytes    int64
	retSince    time.Time    // when the bounds were last set
	cursors     topicCursors // its fan-out cursors (model_live.go)
}

// partModel is one partition of a topic incarnation.
type partModel struct {
	committed  int64                // the high watermark the produces that returned promise
	commitAt   []time.Time          // by offset: when its produce returned
	start      int64                // the log start last seen
	settled    int64                // the highest log start seen: below it retention deleted every record once (settled)
	acked      map[int64]time.Time  // offset -> when its ack returned
	leases     map[int64]leaseModel // offset -> its unexpired (or not yet reclaimed) lease
	ids        map[uint64]bool      // every lease id given for the partition (this incarnation)
	unbounded  bool                 // no retention bound since start was last seen
	lastLeases []uint64             // recent lease ids, for nacks (old ones too)
	batches    []batchSpan          // records of concurrent produces, by offset (model_live.go)
	flt        partFault            // what injected faults left on it (model_fault.go)
	slots      slotHistory          // when an ack last shrank a set over a slot (model_ack.go)
}

// leaseModel is one record's lease as the consume answered it.
type leaseModel struct {
	id       uint64
	deadline time.Time
}

func newPart() *partModel {
	return &partModel{acked: map[int64]time.Time{}, leases: map[int64]leaseModel{}, ids: map[uint64]bool{}}
}

// isAcked reports whether o's ack returned (and was not taken back).
func (p *partModel) isAcked(o int64) bool { _, ok := p.acked[o]; return ok }

// leasedNow reports whether o is under a lease that has not run out at now.
func (p *partModel) leasedNow(o int64, now time.Time) (leaseModel, bool) {
	l, ok := p.leases[o]
	return l, ok && now.Before(l.deadline)
}

// value is the record at offset o of partition p of a topic's gen-th
// incarnation: it names all four, then 0 to 95 bytes of filler derived from
// them, so a record served from the wrong place or torn is caught.
func value(topic string, gen, p int, o int64) []byte {
	return filled(fmt.Sprintf("%s/%d/%d/%d|", topic, gen, p, o))
}

// filled is head and 0 to 95 bytes of filler derived from it.
func filled(head string) []byte {
	h := fnv.New64a()
	h.Write([]byte(head))
	sum := h.Sum64()
	fill := int(sum % 96)
	var b strings.Builder
	b.WriteString(head)
	for i := 0; i < fill; i++ {
		b.WriteByte('a' + byte((sum>>(i%57))%26))
	}
	return []byte(b.String())
}
