package cluster

import (
	"hash/fnv"
	"strconv"
)

// Partition names one partition of a topic, as the placement sees it.
type Partition struct {
	Topic string
	Index int
}

// Place gives each of parts an owner among eligible, given their current
// owners (a partition absent from current, or owned by a node not in
// eligible, has none that counts): the eligible node with the highest
// rendezvous score for it. It is a pure function of its arguments; with no
// eligible node it places nothing.
func Place(parts []Partition, eligible []string, current map[Partition]string) map[Partition]string {
	out := make(map[Partition]string, len(parts))
	if len(eligible) == 0 {
		return out
	}
	for _, p := range parts {
		out[p] = rendezvous(p.Topic, p.Index, eligible)
	}
	return out
}

// PreferredOwner is the member the assigner gives partition p of topic
// among members (highest random weight hashing): each member's score
// depends on the partition and the member only, so a member that joins
// takes about 1/n of the partitions and the rest keep their choice.
func PreferredOwner(topic string, p int, members []string) string {
	return rendezvous(topic, p, members)
}

// rendezvous is PreferredOwner.
func rendezvous(topic string, p int, members []string) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		h := fnv.New64a()
		h.Write([]byte(topic))
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(p)))
		h.Write([]byte{0})
		h.Write([]byte(m))
		if s := mix64(h.Sum64()); best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
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
