package simulation

import (
	"errors"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// The fan-out cursor operations (runtime.Node's CreateCursor, Cursor,
// ReadCursor, CommitCursor, DeleteCursor), each checked against the
// model of model_live.go: a cursor stands exactly where its create, its
// commits and its advancing reads put it, never past the high watermark;
// a read through it serves the produced bytes from its position on
// (stepping only over records retention deleted); a deleted cursor, or
// one of a deleted incarnation, is not found.

// atRest lets the bubble come to rest (settle.go: every goroutine woken
// since, a reaper pass a retention change woke, the metastore's change
// feed) and takes the bounds it left into the model, checked: each
// operation of these files (cursors, long polls, concurrent producers,
// the floor) starts from a known state.
func (r *runner) atRest() {
	r.settle()
	r.checkAll(false)
}

// cursorName draws one of the run's cursor names.
func (r *runner) cursorName() string { return cursorNames[r.rng.IntN(len(cursorNames))] }

// cursorCreate creates a cursor from the earliest or the latest record,
// then, one time in three each, moves it to an offset or to a time (a
// seek by time, checked) by commits: the HTTP API's create from earliest
// or latest, and a broker's create at an offset or a time.
func (r *runner) cursorCreate() {
	r.atRest()
	t, name := r.pick(), r.cursorName()
	r.createCursor(t, name)
}

// createCursor creates cursor name of t as cursorCreate says.
func (r *runner) createCursor(t *topicModel, name string) {
	start, from := runtime.CursorEarliest, "earliest"
	if r.rng.IntN(2) == 0 {
		start, from = runtime.CursorLatest, "latest"
	}
	var created bool
	err := retryBusy(func() (err error) { created, err = r.n.CreateCursor(r.ctx, t.name, name, start); return err })
	r.logf("cursor %s of %s: create from %s: created %v (%v)", name, t.name, from, created, err)
	r.must("create cursor", err)
	r.res.Live.CursorOps++
	if c := t.cursors.get(name); c != nil {
		if created {
			r.failf("cursor %s of %s: made again while it existed", name, t.name)
		}
		r.checkCursor(t, name) // its positions left as they were
		return
	}
	if !created {
		r.failf("cursor %s of %s: create found it existing, but no create of it returned", name, t.name)
	}
	got := r.cursorPositions(t, name)
	infos := r.describe(t)
	pos := make([]int64, len(t.parts))
	for pi, p := range t.parts {
		if pi >= len(got) {
			break // checkPositions says so
		}
		o := got[pi].Position
		if start == runtime.CursorLatest && o != p.committed {
			r.failf("cursor %s of %s/%d: made from latest at %d, high watermark %d", name, t.name, pi, o, p.committed)
		}
		if start == runtime.CursorEarliest && (o < p.start || o > infos[pi].StartOffset) {
			r.failf("cursor %s of %s/%d: made from earliest at %d, the log started at %d, then %d", name, t.name, pi, o, p.start, infos[pi].StartOffset)
		}
		pos[pi] = o
	}
	r.checkPositions(t, name, t.cursors.add(name, pos), got, "create")
	switch r.rng.IntN(3) {
	case 0: // at an offset
		for pi, p := range t.parts {
			r.commitCursor(t, name, pi, max(p.start-2, 0)+r.rng.Int64N(p.committed-max(p.start-2, 0)+1))
		}
	case 1: // at a time
		for pi := range t.parts {
			r.commitCursor(t, name, pi, r.offsetAt(t, pi, r.drawTime(t.parts[pi])))
		}
	}
}

// drawTime draws a time in milliseconds around the partition's commits:
// one of them, a millisecond either side, or before or after them all.
func (r *runner) drawTime(p *partModel) int64 {
	now := time.Now().UnixMilli()
	if len(p.commitAt) == 0 || r.rng.IntN(5) == 0 {
		return now - int64(r.rng.IntN(30000)) + 2000
	}
	return p.commitAt[r.rng.IntN(len(p.commitAt))].UnixMilli() + int64(r.rng.IntN(3)) - 1
}

// offsetAt seeks by time and checks the answer: the first record still
// held committed at or after atMs, or the high watermark when none is (an
// answer under the log's start counts as the start: nothing is below it).
func (r *runner) offsetAt(t *topicModel, pi int, atMs int64) int64 {
	var off int64
	// Through a gate: a seek that rebuilt a sealed segment's time index
	// hands it to the log's actor to write out and reads on, without
	// waiting; the actor's write comes after the seek's reads, always.
	g := r.openGate()
	err := g.retry(func() (err error) { off, err = r.n.OffsetAt(r.ctx, t.name, pi, atMs); return err })
	g.close()
	r.logf("offset of %s/%d at %d ms: %d (%v)", t.name, pi, atMs, off, err)
	r.must("offset at", err)
	p := t.parts[pi]
	start := r.describe(t)[pi].StartOffset
	want := p.committed
	for o := start; o < p.committed; o++ {
		if p.commitAt[o].UnixMilli() >= atMs {
			want = o
			break
		}
	}
	if max(off, start) != want || off > p.committed {
		r.failf("offset of %s/%d at %d ms: %d, want %d (log start %d, high watermark %d)", t.name, pi, atMs, off, want, start, p.committed)
	}
	return off
}

// cursorCommit sets a cursor's position in one partition: anywhere from
// a little under the log's start to the high watermark, or out of range.
func (r *runner) cursorCommit() {
	r.atRest()
	t, name := r.pick(), r.cursorName()
	pi := r.rng.IntN(len(t.parts))
	p := t.parts[pi]
	off := max(p.start-3, 0) + r.rng.Int64N(p.committed-max(p.start-3, 0)+1)
	switch r.rng.IntN(8) {
	case 0:
		off = -1
	case 1:
		off = p.committed + 1 + r.rng.Int64N(3)
	}
	r.commitCursor(t, name, pi, off)
}

// commitCursor commits off and checks the answer: a cursor the model
// lacks is not found, a position past the high watermark (or under 0) is
// refused and moves nothing, any other is taken.
func (r *runner) commitCursor(t *topicModel, name string, pi int, off int64) {
	err := retryBusy(func() error { return r.n.CommitCursor(r.ctx, t.name, name, pi, off) })
	r.logf("cursor %s of %s/%d: commit %d (%v)", name, t.name, pi, off, err)
	r.res.Live.CursorOps++
	c := t.cursors.get(name)
	switch {
	case c == nil:
		if !errors.Is(err, runtime.ErrCursorNotFound) {
			r.failf("cursor %s of %s/%d: commit of a cursor never made or deleted: %v, want not found", name, t.name, pi, err)
		}
	case off < 0 || off > t.parts[pi].committed:
		if !errors.Is(err, partition.ErrBeyondHighWatermark) {
			r.failf("cursor %s of %s/%d: commit at %d, high watermark %d: %v, want beyond the high watermark", name, t.name, pi, off, t.parts[pi].committed, err)
		}
	default:
		r.must("commit cursor", err)
		c.set(pi, off)
	}
}

// cursorRead reads one partition through a cursor, advancing it or not
// (a peek), with a record bound and sometimes a byte bound small enough
// to cut the answer after its first record.
func (r *runner) cursorRead() {
	r.atRest()
	t, name := r.pick(), r.cursorName()
	pi := r.rng.IntN(len(t.parts))
	maxRecords, maxBytes := 1+r.rng.IntN(100), 1<<20
	if r.rng.IntN(4) == 0 {
		maxBytes = 1 + r.rng.IntN(400)
	}
	advance := r.rng.IntN(4) > 0
	var res runtime.CursorRead
	err := retryBusy(func() (err error) {
		res, err = r.n.ReadCursor(r.ctx, t.name, name, pi, maxRecords, maxBytes, advance)
		return err
	})
	r.logf("cursor %s of %s/%d: read max %d, %d B, advance %v: %d records, next %d (%v)", name, t.name, pi, maxRecords, maxBytes, advance, len(res.Records), res.Next, err)
	r.res.Live.CursorOps++
	c := t.cursors.get(name)
	if c == nil {
		if !errors.Is(err, runtime.ErrCursorNotFound) {
			r.failf("cursor %s of %s/%d: read of a cursor never made or deleted: %v, want not found", name, t.name, pi, err)
		}
		return
	}
	r.must("read cursor", err)
	r.checkCursorRead(t, name, pi, c.pos[pi], maxRecords, res.ReadResult, res.Skipped)
	if advance {
		c.set(pi, res.Next)
	}
}

// checkCursorRead checks a read through a cursor standing at from: the
// records from from on (or from the log's start, when retention deleted
// what lies between), dense, as produced, at most maxRecords, at least
// one unless the read reached the high watermark; next after the last.
// Nothing is damaged in a run, so nothing is skipped.
func (r *runner) checkCursorRead(t *topicModel, name string, pi int, from int64, maxRecords int, res partition.ReadResult, skipped int64) {
	p := t.parts[pi]
	first := res.Next
	if len(res.Records) > 0 {
		first = res.Records[0].Offset
	}
	switch {
	case skipped != 0:
		r.failf("cursor %s of %s/%d: read skipped %d records, nothing is damaged", name, t.name, pi, skipped)
	case res.HighWatermark != p.committed:
		r.failf("cursor %s of %s/%d: read saw high watermark %d, want %d", name, t.name, pi, res.HighWatermark, p.committed)
	case first < from:
		r.failf("cursor %s of %s/%d: read from %d, the cursor stands at %d", name, t.name, pi, first, from)
	case len(res.Records) == 0 && res.Next != p.committed:
		r.failf("cursor %s of %s/%d: read from %d gave nothing, next %d, high watermark %d", name, t.name, pi, from, res.Next, p.committed)
	case len(res.Records) > maxRecords:
		r.failf("cursor %s of %s/%d: %d records, at most %d asked", name, t.name, pi, len(res.Records), maxRecords)
	case res.Next != first+int64(len(res.Records)):
		r.failf("cursor %s of %s/%d: %d records from %d, next %d", name, t.name, pi, len(res.Records), first, res.Next)
	}
	if first > from {
		if start := r.describe(t)[pi].StartOffset; start < first {
			r.failf("cursor %s of %s/%d: read stepped from %d to %d, the log starts at %d", name, t.name, pi, from, first, start)
		}
	}
	for i, rec := range res.Records {
		r.checkRecord(t, pi, first+int64(i), rec)
	}
}

// cursorDelete deletes a cursor; once it returned, the cursor is not
// found by a lookup, a read or a commit.
func (r *runner) cursorDelete() {
	r.atRest()
	t, name := r.pick(), r.cursorName()
	err := retryBusy(func() error { return r.n.DeleteCursor(r.ctx, t.name, name) })
	r.logf("cursor %s of %s: delete (%v)", name, t.name, err)
	r.res.Live.CursorOps++
	if t.cursors.get(name) == nil {
		if !errors.Is(err, runtime.ErrCursorNotFound) {
			r.failf("cursor %s of %s: delete of a cursor never made or deleted: %v, want not found", name, t.name, err)
		}
		return
	}
	r.must("delete cursor", err)
	delete(t.cursors.by, name)
	r.checkCursor(t, name)
	pi := r.rng.IntN(len(t.parts))
	err = retryBusy(func() error { _, err := r.n.ReadCursor(r.ctx, t.name, name, pi, 10, 1<<20, true); return err })
	if !errors.Is(err, runtime.ErrCursorNotFound) {
		r.failf("cursor %s of %s/%d: read after its delete: %v, want not found", name, t.name, pi, err)
	}
	r.commitCursor(t, name, pi, t.parts[pi].committed)
}

// cursorCheck looks every cursor name up on every topic.
func (r *runner) cursorCheck() {
	r.atRest()
	r.logf("check cursors")
	r.res.Live.CursorOps++
	for _, t := range r.topics {
		r.on(t)
		for _, name := range cursorNames {
			r.checkCursor(t, name)
		}
	}
}
