package cluster

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The properties of Place (placement.go): balance per topic and per node
// within one, the fewest moves for that balance, the bounds that gives a
// join, a leave and a new topic, and determinism.

// nodePool names every node a test draws from.
var nodePool = []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"}

// drawTopics draws up to maxTopics topics of 1 to maxPartitions partitions.
func drawTopics(t *rapid.T, maxTopics, maxPartitions int) []Partition {
	var parts []Partition
	for i := range rapid.IntRange(1, maxTopics).Draw(t, "topics") {
		for p := range rapid.IntRange(1, maxPartitions).Draw(t, fmt.Sprintf("partitions%d", i)) {
			parts = append(parts, Partition{fmt.Sprintf("t%d", i), p})
		}
	}
	return parts
}

// drawNodes draws a set of minNodes to maxNodes nodes of the pool, in any
// order.
func drawNodes(t *rapid.T, minNodes, maxNodes int, label string) []string {
	return rapid.SliceOfNDistinct(rapid.SampledFrom(nodePool), minNodes, maxNodes, rapid.ID[string]).Draw(t, label)
}

// drawCurrent draws a current assignment of parts: each partition without
// an owner, or owned by any node of the pool, eligible or not.
func drawCurrent(t *rapid.T, parts []Partition) map[Partition]string {
	current := map[Partition]string{}
	owner := rapid.SampledFrom(append([]string{""}, nodePool...))
	for _, p := range parts {
		if o := owner.Draw(t, "owner"); o != "" {
			current[p] = o
		}
	}
	return current
}

// checkBalanced fails unless out places every one of parts, and only
// them, on eligible, each topic's partitions floor(P/N) or ceil(P/N) on
// every eligible node and each node's total floor(T/N) or ceil(T/N).
func checkBalanced(t fataler, parts []Partition, eligible []string, out map[Partition]string) {
	t.Helper()
	n := len(eligible)
	if len(out) != len(parts) {
		t.Fatalf("%d partitions placed, of %d", len(out), len(parts))
	}
	perTopic := map[string]map[string]int{}
	sizes, total := map[string]int{}, map[string]int{}
	for _, p := range parts {
		o, ok := out[p]
		if !ok || !slices.Contains(eligible, o) {
			t.Fatalf("%v placed on %q, not one of %v", p, o, eligible)
		}
		if perTopic[p.Topic] == nil {
			perTopic[p.Topic] = map[string]int{}
		}
		perTopic[p.Topic][o]++
		sizes[p.Topic]++
		total[o]++
	}
	within := func(got, of int) bool { return got >= of/n && got <= (of+n-1)/n }
	for topic, counts := range perTopic {
		for _, node := range eligible {
			if !within(counts[node], sizes[topic]) {
				t.Fatalf("topic %s: %d of its %d partitions on %s, over %d nodes: %v", topic, counts[node], sizes[topic], node, n, counts)
			}
		}
	}
	for _, node := range eligible {
		if !within(total[node], len(parts)) {
			t.Fatalf("%d of %d partitions on %s, over %d nodes: %v", total[node], len(parts), node, n, total)
		}
	}
}

// fataler is what a check needs of a test: a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// moved counts the partitions whose owner in out is not the one in
// current, of those current gives an owner.
func moved(current, out map[Partition]string) int {
	n := 0
	for p, o := range current {
		if o != out[p] {
			n++
		}
	}
	return n
}

// TestPlace_BalancesEachTopicAndEachNode: whatever the topics, the
// eligible nodes and the current owners (none, eligible or not), every
// partition is placed on an eligible node, each topic's floor(P/N) or
// ceil(P/N) a node and each node's total floor(T/N) or ceil(T/N).
func TestPlace_BalancesEachTopicAndEachNode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := drawTopics(t, 12, 40)
		eligible := drawNodes(t, 1, 6, "eligible")
		checkBalanced(t, parts, eligible, Place(parts, eligible, drawCurrent(t, parts)))
	})
}

// fewestMoves is, by trying every balanced placement's counts, the fewest
// partitions any placement with Place's balance must take off an
// eligible current owner: for each topic, which nodes hold ceil(P/N)
// rather than floor(P/N).
func fewestMoves(parts []Partition, eligible []string, current map[Partition]string) int {
	n := len(eligible)
	var topics []string
	held := map[string][]int{} // topic -> partitions on each eligible node now
	size := map[string]int{}
	for _, p := range parts {
		if held[p.Topic] == nil {
			topics = append(topics, p.Topic)
			held[p.Topic] = make([]int, n)
		}
		size[p.Topic]++
		if i := slices.Index(eligible, current[p]); i >= 0 {
			held[p.Topic][i]++
		}
	}
	best := len(parts) + 1
	totals := make([]int, n)
	var try func(t, moves int)
	try = func(t, moves int) {
		if t == len(topics) {
			for _, got := range totals {
				if got < len(parts)/n || got > (len(parts)+n-1)/n {
					return
				}
			}
			best = min(best, moves)
			return
		}
		floor, extra := size[topics[t]]/n, size[topics[t]]%n
		for mask := range 1 << n {
			if popcount(mask) != extra {
				continue
			}
			cost := 0
			for i := range n {
				share := floor + mask>>i&1
				totals[i] += share
				cost += max(0, held[topics[t]][i]-share)
			}
			try(t+1, moves+cost)
			for i := range n {
				totals[i] -= floor + mask>>i&1
			}
		}
	}
	try(0, 0)
	return best
}

func popcount(x int) int {
	n := 0
	for ; x > 0; x &= x - 1 {
		n++
	}
	return n
}

// TestPlace_MovesTheFewestPartitionsBalanceAllows: of the partitions with
// an eligible current owner, Place takes off it exactly as many as the
// best balanced placement must (found by trying them all, on small
// clusters).
func TestPlace_MovesTheFewestPartitionsBalanceAllows(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := drawTopics(t, 4, 9)
		eligible := drawNodes(t, 1, 4, "eligible")
		current := drawCurrent(t, parts)
		out := Place(parts, eligible, current)
		checkBalanced(t, parts, eligible, out)
		onEligible := map[Partition]string{}
		for p, o := range current {
			if slices.Contains(eligible, o) {
				onEligible[p] = o
			}
		}
		if got, want := moved(onEligible, out), fewestMoves(parts, eligible, current); got != want {
			t.Fatalf("moved %d partitions off eligible owners; a balanced placement needs only %d\ncurrent %v\nplaced  %v", got, want, current, out)
		}
	})
}

// balancedStart is a placement with Place's balance over eligible, drawn
// as Place makes one from some earlier assignment.
func balancedStart(t *rapid.T, parts []Partition, eligible []string) map[Partition]string {
	start := Place(parts, eligible, drawCurrent(t, parts))
	checkBalanced(t, parts, eligible, start)
	return start
}

// TestPlace_AJoinMovesItsShareAndAtMostAsManyAgain: from a balanced
// placement, a node that joins takes floor(T/N) or ceil(T/N) (N counting
// it); at least floor(T/N) partitions move and at most twice that.
func TestPlace_AJoinMovesItsShareAndAtMostAsManyAgain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := drawTopics(t, 12, 40)
		eligible := drawNodes(t, 1, len(nodePool)-1, "eligible")
		start := balancedStart(t, parts, eligible)
		var joiner string
		for _, id := range nodePool {
			if !slices.Contains(eligible, id) {
				joiner = id
				break
			}
		}
		after := append(slices.Clone(eligible), joiner)
		out := Place(parts, after, start)
		checkBalanced(t, parts, after, out)
		share := len(parts) / len(after)
		if got := moved(start, out); got < share || got > 2*share {
			t.Fatalf("a join to %d nodes moved %d of %d partitions; want %d to %d", len(after), got, len(parts), share, 2*share)
		}
	})
}

// TestPlace_ALeaveMovesItsOwnAndAtMostAsManyAgain: from a balanced
// placement, a node that leaves the eligible ones (drained, or lost) has
// all its c partitions moved, and at most c others move.
func TestPlace_ALeaveMovesItsOwnAndAtMostAsManyAgain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := drawTopics(t, 12, 40)
		eligible := drawNodes(t, 2, len(nodePool), "eligible")
		start := balancedStart(t, parts, eligible)
		leaver := rapid.SampledFrom(eligible).Draw(t, "leaver")
		after := slices.DeleteFunc(slices.Clone(eligible), func(id string) bool { return id == leaver })
		out := Place(parts, after, start)
		checkBalanced(t, parts, after, out)
		own := 0
		for _, o := range start {
			if o == leaver {
				own++
			}
		}
		if got := moved(start, out); got > 2*own {
			t.Fatalf("%s left with %d of %d partitions; %d moved, want at most %d", leaver, own, len(parts), got, 2*own)
		}
	})
}

// TestPlace_ANewTopicMovesNothingElse: from a balanced placement, new
// topics' partitions are placed and no other partition moves.
func TestPlace_ANewTopicMovesNothingElse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := drawTopics(t, 12, 40)
		eligible := drawNodes(t, 1, 6, "eligible")
		start := balancedStart(t, parts, eligible)
		for i := range rapid.IntRange(1, 3).Draw(t, "new topics") {
			for p := range rapid.IntRange(1, 40).Draw(t, fmt.Sprintf("new partitions%d", i)) {
				parts = append(parts, Partition{fmt.Sprintf("new%d", i), p})
			}
		}
		out := Place(parts, eligible, start)
		checkBalanced(t, parts, eligible, out)
		if got := moved(start, out); got != 0 {
			t.Fatalf("new topics moved %d partitions already placed", got)
		}
	})
}

// TestPlace_IsAFunctionOfItsSets: the placement depends on the set of
// partitions, the set of eligible nodes and the current owners only: not
// on the order either is given in, nor on repeats.
func TestPlace_IsAFunctionOfItsSets(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := drawTopics(t, 12, 40)
		eligible := drawNodes(t, 1, 6, "eligible")
		current := drawCurrent(t, parts)
		want := Place(parts, eligible, current)
		shuffled := rapid.Permutation(append(slices.Clone(parts), parts[:len(parts)/2]...)).Draw(t, "parts order")
		again := rapid.Permutation(append(slices.Clone(eligible), eligible[0])).Draw(t, "eligible order")
		if got := Place(shuffled, again, maps.Clone(current)); !maps.Equal(got, want) {
			t.Fatalf("the same sets in another order placed differently:\n%v\n%v", want, got)
		}
	})
}
