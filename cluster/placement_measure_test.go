package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestPlace_Measured prints (with -v) what docs/scaling.md quotes: the
// per-node counts of 12, 100 and 1,000 partitions placed on 3 and 5 nodes,
// as one topic and as topics of 1, 2, 3, ... partitions, and how many
// move when a node joins and when each one leaves in turn; and checks each
// against the guarantee (and, for 12 partitions, that no balanced
// placement moves fewer).
//
//	go test -run TestPlace_Measured -v ./cluster/
func TestPlace_Measured(t *testing.T) {
	for _, total := range []int{12, 100, 1000} {
		for _, layout := range []string{"one topic", "topics of 1, 2, 3, ..."} {
			parts := measuredTopics(total, layout == "one topic")
			for _, n := range []int{3, 5} {
				nodes := nodePool[:n]
				start := Place(parts, nodes, nil)
				checkBalanced(t, parts, nodes, start)
				joined := nodePool[:n+1]
				afterJoin := Place(parts, joined, start)
				checkBalanced(t, parts, joined, afterJoin)
				share, joinMoved := total/(n+1), moved(start, afterJoin)
				if joinMoved < share || joinMoved > 2*share || total == 12 && joinMoved != fewestMoves(parts, joined, start) {
					t.Errorf("%d partitions, %s, a join to %d nodes moved %d", total, layout, n+1, joinMoved)
				}
				var leaves []string
				for i, leaver := range nodes {
					rest := slices.DeleteFunc(slices.Clone(nodes), func(id string) bool { return id == leaver })
					afterLeave := Place(parts, rest, start)
					checkBalanced(t, parts, rest, afterLeave)
					own, got := perNode(start, nodes)[i], moved(start, afterLeave)
					if got < own || got > 2*own || total == 12 && got-own != fewestMoves(parts, rest, start) {
						t.Errorf("%d partitions, %s, %s leaving %d nodes with %d moved %d", total, layout, leaver, n, own, got)
					}
					leaves = append(leaves, fmt.Sprintf("%d/%d", own, got))
				}
				t.Logf("%4d partitions, %s, on %d nodes: %s; a node joins: %d move, to %s; each leaving in turn (had/moved): %s",
					total, layout, n, counts(perNode(start, nodes)), joinMoved, counts(perNode(afterJoin, joined)), strings.Join(leaves, ", "))
			}
		}
	}
}

// BenchmarkPlace: Place over many topics (1 to 200 partitions each), when
// nothing is to move (a round with a new topic, say), when a node joins
// and when one leaves.
//
//	go test -run '^$' -bench Place/100k -benchtime 3x ./cluster/
func BenchmarkPlace(b *testing.B) {
	for _, size := range []struct {
		name          string
		topics, nodes int
	}{{"100k", 1000, 30}, {"1M", 10000, 100}} {
		b.Run(size.name, func(b *testing.B) {
			var parts []Partition
			for i := range size.topics {
				for p := range 1 + i*7919%200 {
					parts = append(parts, Partition{fmt.Sprintf("topic-%d", i), p})
				}
			}
			var nodes []string
			for i := range size.nodes + 1 {
				nodes = append(nodes, fmt.Sprintf("node-%03d", i))
			}
			start := Place(parts, nodes[:size.nodes], nil)
			for _, c := range []struct {
				name  string
				nodes []string
			}{{"same", nodes[:size.nodes]}, {"join", nodes}, {"leave", nodes[1:size.nodes]}} {
				b.Run(c.name, func(b *testing.B) {
					for b.Loop() {
						Place(parts, c.nodes, start)
					}
				})
			}
		})
	}
}

// measuredTopics is total partitions as one topic, or as topics of 1, 2,
// 3, ... partitions, the last one what is left.
func measuredTopics(total int, one bool) []Partition {
	var parts []Partition
	for topic, size := 0, 1; len(parts) < total; topic, size = topic+1, size+1 {
		if one {
			size = total
		}
		for p := range min(size, total-len(parts)) {
			parts = append(parts, Partition{fmt.Sprintf("t%d", topic), p})
		}
	}
	return parts
}

// perNode counts the partitions on each of nodes.
func perNode(placed map[Partition]string, nodes []string) []int {
	out := make([]int, len(nodes))
	for _, o := range placed {
		out[slices.Index(nodes, o)]++
	}
	return out
}

func counts(c []int) string {
	s := make([]string, len(c))
	for i, v := range c {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, "/")
}
