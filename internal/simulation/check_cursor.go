package simulation

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/narad-io/storage/runtime"
)

// cursorPositions looks a cursor up (Node.Cursor); it must be found.
func (r *runner) cursorPositions(t *topicModel, name string) []runtime.CursorPosition {
	var got []runtime.CursorPosition
	err := retryBusy(func() (err error) { got, err = r.n.Cursor(r.ctx, t.name, name); return err })
	r.must("cursor "+name+" of "+t.name, err)
	return got
}

// checkCursor looks a cursor up: found, at the model's positions, when
// the model has it; not found otherwise (never made, deleted, or made on
// an incarnation of the topic since deleted).
func (r *runner) checkCursor(t *topicModel, name string) {
	c := t.cursors.get(name)
	if c == nil {
		var got []runtime.CursorPosition
		err := retryBusy(func() (err error) { got, err = r.n.Cursor(r.ctx, t.name, name); return err })
		if !errors.Is(err, runtime.ErrCursorNotFound) {
			r.failf("cursor %s of %s: never made, deleted, or of a deleted incarnation, but found %+v (%v)", name, t.name, got, err)
		}
		return
	}
	r.checkPositions(t, name, c, r.cursorPositions(t, name), "lookup")
}

// checkPositions checks a lookup's answer against the model: one
// position for each partition, in order, each the model's, none past the
// high watermark, with the lag it leaves.
func (r *runner) checkPositions(t *topicModel, name string, c *cursorModel, got []runtime.CursorPosition, what string) {
	if len(got) != len(t.parts) {
		r.failf("cursor %s of %s: %s answered %d partitions, the topic has %d", name, t.name, what, len(got), len(t.parts))
	}
	for pi, g := range got {
		committed := t.parts[pi].committed
		switch {
		case g.Partition != pi:
			r.failf("cursor %s of %s: %s answered partition %d in place %d", name, t.name, what, g.Partition, pi)
		case g.Position != c.pos[pi]:
			r.failf("cursor %s of %s/%d: %s says position %d, want %d (what was read or committed)", name, t.name, pi, what, g.Position, c.pos[pi])
		case g.Position > committed || g.HighWatermark != committed:
			r.failf("cursor %s of %s/%d: %s says position %d, high watermark %d, want high watermark %d", name, t.name, pi, what, g.Position, g.HighWatermark, committed)
		case g.Lag != max(committed-g.Position, 0):
			r.failf("cursor %s of %s/%d: %s says lag %d at position %d, high watermark %d", name, t.name, pi, what, g.Lag, g.Position, committed)
		}
	}
}

// checkCursors checks every cursor name of a topic after a clean restart
// or a crash the model was taken through (and at the start and end of a
// run): each cursor's positions are then what its file holds, so its
// history starts again from them.
func (r *runner) checkCursors(t *topicModel) {
	for _, name := range cursorNames {
		r.checkCursor(t, name)
		if c := t.cursors.get(name); c != nil {
			c.reset()
		}
	}
}

// cursorsAfterCrash checks the cursors after a crash at at and takes the
// model to what the node holds. The contract (docs/http-api.md, "Fan-out
// cursors"; docs/design.md, "Fan-out cursors"): a create and a delete
// that returned are durable; a position is written out every write-out
// interval, so a crash steps a cursor back by at most that interval,
// never forward: the node must hold a position the cursor stood at
// within cursorWindow before the crash.
func (r *runner) cursorsAfterCrash(at time.Time) {
	for _, t := range r.topics {
		r.on(t)
		for _, name := range cursorNames {
			c := t.cursors.get(name)
			if c == nil {
				r.checkCursor(t, name)
				continue
			}
			r.res.Live.CursorCrashes++
			got := r.cursorPositions(t, name)
			if len(got) != len(t.parts) {
				r.failf("after the crash, cursor %s of %s: %d partitions, the topic has %d", name, t.name, len(got), len(t.parts))
			}
			for pi, g := range got {
				if g.Partition != pi || !c.mayHold(pi, g.Position, at) {
					r.failf("after the crash, cursor %s of %s/%d: position %d, not one it held within %v before the crash (it stood at %d; lately at %s)",
						name, t.name, g.Partition, g.Position, cursorWindow, c.pos[pi], heldString(c.held[pi], at))
				}
				c.pos[pi] = g.Position
			}
			c.reset()
		}
	}
}

// heldString shows a cursor's recent positions, each with how long
// before at it was set.
func heldString(held []heldPos, at time.Time) string {
	var b strings.Builder
	for i, h := range held {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d (%v before)", h.pos, at.Sub(h.at))
	}
	return b.String()
}
