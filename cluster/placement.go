package cluster

import (
	"cmp"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
)

// Partition names one partition of a topic, as the placement sees it.
type Partition struct {
	Topic string
	Index int
}

// Place gives each of parts an owner among eligible, given their current
// owners (current: a partition absent from it, or owned by a node not
// eligible, has no owner that counts and must be placed). With N eligible
// nodes, P of a topic's partitions among parts and T parts in all:
//
//   - balance: every eligible node gets floor(P/N) or ceil(P/N) of each
//     topic's partitions, and floor(T/N) or ceil(T/N) in all;
//   - fewest moves: of all the placements with that balance, Place leaves
//     the most partitions on their current owner, so it moves only what
//     the balance makes it move;
//   - a function of its sets: of the set of parts, the set of eligible
//     nodes and current alone, not of the order either is given in.
//
// With no eligible node it places nothing.
//
// What moves when the nodes change (a join, a leave), why no more, and
// which partitions are chosen are docs/scaling.md's "Placement"; the
// choice is placement_balance.go's.
func Place(parts []Partition, eligible []string, current map[Partition]string) map[Partition]string {
	nodes := slices.Compact(slices.Sorted(slices.Values(eligible)))
	out := make(map[Partition]string, len(parts))
	if len(nodes) == 0 {
		return out
	}
	topics := groupByTopic(parts, nodes, current)
	keys := nodeKeys(nodes)
	rows := make([]*extraRow, len(topics))
	for i, t := range topics {
		rows[i] = t.extraRow(keys)
	}
	chooseExtras(rows, len(nodes))
	for i, t := range topics {
		t.place(nodes, keys, rows[i], out)
	}
	return out
}

// topicParts is one topic's partitions among those to place, in order,
// and the eligible node each is on now (-1: none).
type topicParts struct {
	name    string
	indexes []int
	on      []int
}

// groupByTopic groups parts by topic, topics and partitions in order,
// each partition once, with the node each is on now.
func groupByTopic(parts []Partition, nodes []string, current map[Partition]string) []topicParts {
	byName := map[string][]int{}
	for _, p := range parts {
		byName[p.Topic] = append(byName[p.Topic], p.Index)
	}
	nodeIndex := make(map[string]int, len(nodes))
	for i, node := range nodes {
		nodeIndex[node] = i
	}
	out := make([]topicParts, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		t := topicParts{name: name, indexes: slices.Compact(slices.Sorted(slices.Values(byName[name])))}
		t.on = make([]int, len(t.indexes))
		for j, p := range t.indexes {
			if i, ok := nodeIndex[current[Partition{name, p}]]; ok {
				t.on[j] = i
			} else {
				t.on[j] = -1
			}
		}
		out = append(out, t)
	}
	return out
}

// extraRow is the topic's part in choosing its one-over-the-floor places.
func (t topicParts) extraRow(keys []uint64) *extraRow {
	n, floor := len(keys), len(t.indexes)/len(keys)
	row := &extraRow{need: len(t.indexes) % n, want: make([]bool, n), rank: make([]uint64, n), has: make([]bool, n)}
	h := partitionHash(t.name, -1) // the topic's own
	held := make([]int, n)
	for _, i := range t.on {
		if i >= 0 {
			held[i]++
		}
	}
	for i, key := range keys {
		row.rank[i] = score(h, key)
		row.want[i] = held[i] > floor
	}
	return row
}

// place gives the topic's partitions owners: each node floor(P/N), plus
// one where row has it. A node holding more than that keeps those it
// scores highest; every other partition goes to the node with room that
// scores it highest.
func (t topicParts) place(nodes []string, keys []uint64, row *extraRow, out map[Partition]string) {
	n := len(nodes)
	room := make([]int, n)
	holding := make([][]int, n)
	var loose []int
	for i := range room {
		room[i] = len(t.indexes)/n + b2i(row.has[i])
	}
	for j, p := range t.indexes {
		if i := t.on[j]; i >= 0 {
			holding[i] = append(holding[i], p)
		} else {
			loose = append(loose, p)
		}
	}
	for i, ps := range holding {
		if len(ps) > room[i] {
			scores := make(map[int]uint64, len(ps))
			for _, p := range ps {
				scores[p] = score(partitionHash(t.name, p), keys[i])
			}
			slices.SortStableFunc(ps, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
			loose = append(loose, ps[room[i]:]...)
			ps = ps[:room[i]]
		}
		for _, p := range ps {
			out[Partition{t.name, p}] = nodes[i]
		}
		room[i] -= len(ps)
	}
	slices.Sort(loose)
	for _, p := range loose {
		h, best := partitionHash(t.name, p), -1
		for i := range nodes {
			if room[i] > 0 && (best < 0 || score(h, keys[i]) > score(h, keys[best])) {
				best = i
			}
		}
		out[Partition{t.name, p}] = nodes[best]
		room[best]--
	}
}

// partitionHash hashes partition p of topic for score.
func partitionHash(topic string, p int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(p)))
	return h.Sum64()
}

// nodeKeys are the nodes' keys for score.
func nodeKeys(nodes []string) []uint64 {
	out := make([]uint64, len(nodes))
	for i, node := range nodes {
		h := fnv.New64a()
		h.Write([]byte(node))
		out[i] = mix64(h.Sum64())
	}
	return out
}

// score is the rendezvous score of what h hashes (a partition, a topic)
// for the node of key: pseudo-random, and the same wherever it is
// computed.
func score(h, key uint64) uint64 {
	return mix64(h ^ key)
}

// mix64 is splitmix64's finalizer: FNV alone leaves inputs that differ in
// their last bytes (partition 1 and 2 of a topic) with close scores.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
