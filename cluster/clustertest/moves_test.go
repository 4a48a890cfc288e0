package clustertest

import (
	"errors"
	"testing"
	"time"

	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/runtime"
)

// TestMoves_OneOfCompleteAndCancelWins: a move's record goes requested,
// frozen, then gone by a completion (the assignment names the new owner)
// or a cancel (the old owner's again), each conditional on the record
// read, so when both race exactly one wins; while it is frozen neither
// node's replica says it owns the partition, and every replica locates it
// as moving.
func TestMoves_OneOfCompleteAndCancelWins(t *testing.T) {
	te := startEtcd(t)
	a, b := joinNode(t, te, "a"), joinNode(t, te, "b")
	heard := subscribe(a.ms)
	if _, _, err := a.ms.CreateTopic(bg, "orders", 4, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	owner := owners(t, a.ms, heard, "orders", 4)
	p, from, to := 0, owner[0], "a"
	if from == "a" {
		to = "b"
	}
	node := map[string]*testNode{"a": a, "b": b}
	src, dst := node[from], node[to]
	owners(t, b.ms, subscribe(b.ms), "orders", 4) // both replicas know the owners

	if _, err := src.ms.RequestMove(bg, "orders", p, from); !errors.Is(err, cluster.ErrMoveRefused) {
		t.Fatalf("a move to the owner itself: %v, want ErrMoveRefused", err)
	}
	if _, err := src.ms.RequestMove(bg, "orders", p, "nobody"); !errors.Is(err, cluster.ErrMoveRefused) {
		t.Fatalf("a move to no live member: %v, want ErrMoveRefused", err)
	}
	mv, err := dst.ms.RequestMove(bg, "orders", p, to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.ms.RequestMove(bg, "orders", p, to); !errors.Is(err, cluster.ErrMoveRefused) {
		t.Fatalf("a second move of the partition: %v, want ErrMoveRefused", err)
	}
	if _, err := dst.ms.FreezeMove(bg, mv, time.Now()); !errors.Is(err, cluster.ErrMoveChanged) {
		t.Fatalf("the new owner freezing: %v, want ErrMoveChanged", err)
	}
	// The old owner still serves while the move is only requested.
	if mine, _ := src.ms.Assigned(bg, "orders", p); !mine {
		t.Fatal("the old owner stopped owning a move only requested")
	}
	frozen, err := src.ms.FreezeMove(bg, mv, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if mine, _ := src.ms.Assigned(bg, "orders", p); mine {
		t.Fatal("the old owner's replica still says it owns a frozen partition")
	}
	heardB := subscribe(dst.ms)
	heardB.waitFor(t, "the new owner to see the move frozen", func() bool {
		loc, ok := dst.ms.Locate("orders", p)
		return ok && loc.Moving && loc.NodeID == from
	})
	if mine, _ := dst.ms.Assigned(bg, "orders", p); mine {
		t.Fatal("the new owner owns the partition before the move completed")
	}
	if _, err := src.ms.FreezeMove(bg, mv, time.Now()); !errors.Is(err, cluster.ErrMoveChanged) {
		t.Fatalf("freezing twice: %v, want ErrMoveChanged", err)
	}

	// Both race; one wins.
	completed := make(chan error, 1)
	go func() { completed <- dst.ms.CompleteMove(bg, frozen) }()
	cancelErr := src.ms.CancelMove(bg, frozen)
	completeErr := <-completed
	if (cancelErr == nil) == (completeErr == nil) {
		t.Fatalf("cancel %v, complete %v: want exactly one to win", cancelErr, completeErr)
	}
	lost := completeErr
	wantOwner := from
	if completeErr == nil {
		lost, wantOwner = cancelErr, to
	}
	if !errors.Is(lost, cluster.ErrMoveChanged) {
		t.Fatalf("the losing change: %v, want ErrMoveChanged", lost)
	}
	if owner, ok, err := a.ms.ConfirmOwner(bg, "orders", p); err != nil || !ok || owner != wantOwner {
		t.Fatalf("owner after the race: %q, %v, %v; want %s", owner, ok, err, wantOwner)
	}
	heard.waitFor(t, "the move's record to go", func() bool { return len(a.ms.Moves()) == 0 })
	if mine, _ := node[wantOwner].ms.Assigned(bg, "orders", p); !mine {
		t.Fatalf("the winner's owner %s does not own the partition", wantOwner)
	}
}

// TestMoves_DeletingTheTopicEndsItsMoves: a topic's delete takes its
// moves' records with it, so a frozen move of the deleted incarnation
// never completes, and a record written by another writer (another key
// order, a field this version does not know) is changed all the same
// (its revision, not its bytes, is compared).
func TestMoves_DeletingTheTopicEndsItsMoves(t *testing.T) {
	te := startEtcd(t)
	a, b := joinNode(t, te, "a"), joinNode(t, te, "b")
	heard := subscribe(a.ms)
	if _, _, err := a.ms.CreateTopic(bg, "orders", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	owner := owners(t, a.ms, heard, "orders", 1)
	owners(t, b.ms, subscribe(b.ms), "orders", 1)
	src, to := a, "b"
	if owner[0] == "b" {
		src, to = b, "a"
	}
	mv, err := src.ms.RequestMove(bg, "orders", 0, to)
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := src.ms.FreezeMove(bg, mv, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ms.DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	if moves := a.ms.Moves(); len(moves) != 0 {
		t.Fatalf("moves after the delete: %+v", moves)
	}
	if err := a.ms.CompleteMove(bg, frozen); !errors.Is(err, cluster.ErrMoveChanged) {
		t.Fatalf("completing a deleted topic's frozen move: %v, want ErrMoveChanged", err)
	}

	// Another writer's record of a move.
	if _, _, err := a.ms.CreateTopic(bg, "events", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	owners(t, a.ms, heard, "events", 1)
	foreign := `{"state":"requested","topic":"events","partition":0,"id":"feed","from":"a","to":"b","reason":"drain"}`
	if _, err := te.client().Put(bg, "/narad/moves/events/0", foreign); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "the foreign move record", func() bool { return len(a.ms.Moves()) == 1 })
	if err := a.ms.CancelMove(bg, a.ms.Moves()[0]); err != nil {
		t.Fatalf("cancelling another writer's move record: %v", err)
	}
}
