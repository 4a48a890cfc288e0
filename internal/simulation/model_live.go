package simulation

import (
	"fmt"
	"slices"
	"time"

	"github.com/narad-io/storage/httpapi"
	"github.com/narad-io/storage/runtime"
)

// The model of the operations of ops_cursor.go, ops_longpoll.go,
// ops_concurrent.go and ops_floor.go: fan-out cursors, long polls,
// concurrent producers and the disk floor.
//
// Invariants of the model itself: a topic incarnation's cursors are those
// whose create returned and whose delete did not; a cursor's position in
// a partition is the one its last create, commit or advancing read that
// returned set (after a crash, the one the node holds, within what the
// contract allows); held lists the positions it stood at within
// cursorWindow before now, and the last one before that; a partition's
// batches are its concurrent produces that returned, in offset order,
// none overlapping.

// cursorNames are the names a run's cursors take: few, so creates meet
// existing cursors and deletes meet missing ones.
var cursorNames = []string{"c0", "c1", "c2"}

// cursorWindow is how far back a crash may step a cursor: one write-out
// interval (docs/http-api.md, "Fan-out cursors": positions are written
// out every --consumer-offset-commit-interval, and a crash steps a cursor
// back by at most that interval of reads, never forward), and 100 ms of
// slack.
const cursorWindow = writeOutEvery + 100*time.Millisecond

// topicCursors is a topic incarnation's cursors, by name.
type topicCursors struct {
	by map[string]*cursorModel
}

// get returns the cursor named name, nil if the model has none.
func (tc *topicCursors) get(name string) *cursorModel { return tc.by[name] }

// add records a cursor the node made, at pos by partition.
func (tc *topicCursors) add(name string, pos []int64) *cursorModel {
	if tc.by == nil {
		tc.by = map[string]*cursorModel{}
	}
	c := &cursorModel{pos: make([]int64, len(pos)), held: make([][]heldPos, len(pos))}
	for pi, o := range pos {
		c.set(pi, o)
	}
	tc.by[name] = c
	return c
}

// cursorModel is one cursor: its position in each partition, and the
// positions it held lately.
type cursorModel struct {
	pos  []int64     // by partition
	held [][]heldPos // by partition, oldest first
}

// heldPos is a position a cursor took at a time.
type heldPos struct {
	at  time.Time
	pos int64
}

// set moves the cursor in partition pi to pos, now.
func (c *cursorModel) set(pi int, pos int64) {
	now := time.Now()
	c.pos[pi] = pos
	h := append(c.held[pi], heldPos{now, pos})
	// Keep the last position taken before the window: the cursor stood
	// there when the window began.
	cut := 0
	for cut+1 < len(h) && h[cut+1].at.Before(now.Add(-cursorWindow)) {
		cut++
	}
	if cut > 0 {
		h = slices.Clone(h[cut:])
	}
	c.held[pi] = h
}

// reset forgets the cursor's history: the node holds pos for certain
// (a clean restart or a crash just checked it).
func (c *cursorModel) reset() {
	for pi := range c.pos {
		c.held[pi] = []heldPos{{time.Now(), c.pos[pi]}}
	}
}

// mayHold reports whether a crash at at may leave the cursor at pos in
// partition pi: a position it held within cursorWindow before the crash.
func (c *cursorModel) mayHold(pi int, pos int64, at time.Time) bool {
	h := c.held[pi]
	for i, e := range h {
		// e.pos stood from e.at until the next position was set.
		if e.pos == pos && (i+1 == len(h) || h[i+1].at.After(at.Add(-cursorWindow))) {
			return true
		}
	}
	return false
}

// batchSpan is one concurrent produce's records: count records from base,
// whose bytes name the batch (batchValue), since the producer could not
// know its offsets.
type batchSpan struct {
	base, count int64
	id          int
}

// batchValue is record i of batch id of partition p of a topic's gen-th
// incarnation.
func batchValue(topic string, gen, p, id, i int) []byte {
	return filled(fmt.Sprintf("%s/%d/%d/b%d.%d|", topic, gen, p, id, i))
}

// expect is the record produced at offset o of partition pi of t: a
// concurrent batch's, or the one value names.
func (p *partModel) expect(t *topicModel, pi int, o int64) []byte {
	i, found := slices.BinarySearchFunc(p.batches, o, func(b batchSpan, o int64) int {
		switch {
		case o < b.base:
			return 1
		case o >= b.base+b.count:
			return -1
		}
		return 0
	})
	if found {
		b := p.batches[i]
		return batchValue(t.name, t.gen, pi, b.id, int(o-b.base))
	}
	return value(t.name, t.gen, pi, o)
}

// liveState is the runner's state for these operations: the node's
// metastore and its HTTP API (made on first use), and batch ids. Their
// counts are the run's Result.Live.
type liveState struct {
	ms      runtime.Metastore
	api     *httpapi.Handler
	batches int // batch ids given
}

// LiveCounts counts what these operations did in a run (or in many).
type LiveCounts struct {
	CursorOps      int // creates, reads, commits, deletes and checks of cursors
	CursorCrashes  int // cursors checked after a crash
	LongPolls      int // fetches and cursor reads that waited
	PollsWoken     int // of them, woken by a commit
	WaitConsumes   int // queue consumes that waited
	ConsumesWoken  int // of them, woken by a produce or a nack
	ConcBatches    int // batches of concurrent producers
	GroupedBatches int // of them, queued behind a held commit
	FloorRefusals  int // produces refused by the disk floor
	FloorRetaken   int // refused batches taken again once retention freed space
	ClusterRuns    int // runs of two or three members (cluster.go)
	Moves          int // partitions moved between members (ops_move.go)
	MovesFailed    int // moves a fault on the new owner's install failed, cancelled
	InstallCrashes int // moves completed across a crash of the new owner during its install
	Lost           int // partitions given away empty with a member marked lost
	SetAside       int // copies a lost member set aside when it came back
	Extends        int // lease extensions (ops_extend.go)
}

// Add adds o's counts to c's.
func (c *LiveCounts) Add(o LiveCounts) {
	c.CursorOps += o.CursorOps
	c.CursorCrashes += o.CursorCrashes
	c.LongPolls += o.LongPolls
	c.PollsWoken += o.PollsWoken
	c.WaitConsumes += o.WaitConsumes
	c.ConsumesWoken += o.ConsumesWoken
	c.ConcBatches += o.ConcBatches
	c.GroupedBatches += o.GroupedBatches
	c.FloorRefusals += o.FloorRefusals
	c.FloorRetaken += o.FloorRetaken
	c.ClusterRuns += o.ClusterRuns
	c.Moves += o.Moves
	c.MovesFailed += o.MovesFailed
	c.InstallCrashes += o.InstallCrashes
	c.Lost += o.Lost
	c.SetAside += o.SetAside
	c.Extends += o.Extends
}

// String is the counts' summary line.
func (c LiveCounts) String() string {
	return fmt.Sprintf("cursor operations: %d (checked after %d crashes), long polls: %d (%d woken by a commit), "+
		"waiting consumes: %d (%d woken), concurrent batches: %d (%d grouped behind a held commit), "+
		"floor refusals: %d (%d taken again after retention); cluster runs: %d, moves: %d (%d failed by a fault, cancelled; %d completed across a crash of the new owner), "+
		"partitions given away by a lost member: %d (copies set aside: %d), lease extensions: %d",
		c.CursorOps, c.CursorCrashes, c.LongPolls, c.PollsWoken, c.WaitConsumes, c.ConsumesWoken,
		c.ConcBatches, c.GroupedBatches, c.FloorRefusals, c.FloorRetaken, c.ClusterRuns, c.Moves, c.MovesFailed, c.InstallCrashes, c.Lost, c.SetAside, c.Extends)
}
