package cluster

import (
	"cmp"
	"math"
	"slices"
)

// Place's balance comes down to one choice per topic: which nodes hold one
// partition over the topic's floor. A topic of P partitions on N nodes has
// P mod N such places (its extras); every node then holds floor(P/N) or
// ceil(P/N) of the topic, and its total is the sum of the floors, the same
// for every node, plus its extras. So the per-node balance is a balance of
// extras: with R extras in all, every node holds floor(R/N) or ceil(R/N)
// of them. And an extra on a node that now holds more than the topic's
// floor keeps one partition there that would otherwise move: so the
// fewest moves are the most extras on nodes that want them.
//
// chooseExtras makes that choice as a minimum-cost flow. It starts with
// every topic's extras where it wants them (then where the fewest are),
// which puts no extra where moving it elsewhere would keep more in place;
// then, while a node holds more extras than the balance lets it, it moves
// one along the cheapest path to a node with room (successive shortest
// paths), where a step moves one topic's extra from one node to another
// and costs a partition kept in place when it leaves a node that wanted
// it, and gains one when it reaches a node that wants it. Each path is
// the cheapest there is, so the result is the cheapest balanced choice.
// A path carries as many extras at once as it has rows for at its cost
// (a join's new node takes its extras in a few paths, not one by one).

// extraRow is one topic's part in the choice.
type extraRow struct {
	need int      // how many extras the topic has
	want []bool   // node i holds more than the topic's floor now
	rank []uint64 // the topic's score for node i: a tie goes to the higher
	has  []bool   // the choice: node i holds one of the extras
}

// moveCost is what moving row's extra from node x to node y costs in
// partitions kept in place: -1, 0 or 1.
func (row *extraRow) moveCost(x, y int) int {
	c := 0
	if row.want[x] {
		c++
	}
	if row.want[y] {
		c--
	}
	return c
}

// extraFlow is the state of the choice while it is made.
//
// Invariants, between two paths:
//   - count[i] is the number of rows with has[i]; their sum is every
//     row's need;
//   - every node ends with least or least+1 extras, exactly plus of them
//     with least+1: a node's base (at most least) and its top (one of the
//     plus places, or not) are what it holds within that, and its excess,
//     count-base-top, is never negative;
//   - once tallied, pairs[(x*n+y)*3+c+1] is the number of rows with an
//     extra on x, none on y, whose move from x to y costs c;
//   - no cycle of steps costs less than nothing (moving extras around a
//     cycle never keeps more in place), which each cheapest path keeps.
type extraFlow struct {
	rows        []*extraRow
	n           int
	least, plus int
	count, base []int
	top         []bool
	tops        int
	pairs       []int
}

// The flow's graph: the nodes 0..n-1, then:
//   - pool: the plus places, which a node takes (node -> pool) or gives
//     up to another (pool -> node);
//   - sink: where a node's base, or a new plus place, takes an extra.
func (f *extraFlow) pool() int { return f.n }
func (f *extraFlow) sink() int { return f.n + 1 }

// chooseExtras sets every row's has: the cheapest choice in which each
// node holds floor(R/N) or ceil(R/N) of the R extras, n nodes.
func chooseExtras(rows []*extraRow, n int) {
	f := &extraFlow{rows: rows, n: n, count: make([]int, n), base: make([]int, n), top: make([]bool, n)}
	total := 0
	for _, row := range rows {
		total += row.need
	}
	f.least, f.plus = total/n, total%n
	f.start()
	if f.excess() == 0 {
		return // the usual case: nothing moved since the last placement
	}
	f.pairs = make([]int, n*n*3)
	for r := range rows {
		f.tally(r, 1)
	}
	for f.excess() > 0 {
		if !f.augment() {
			return // cannot happen: a balanced choice always exists
		}
	}
}

// start gives every row its extras where it wants them, the nodes
// holding the fewest extras first, then the rest where the fewest are;
// then takes into each node's base and top what they can take.
func (f *extraFlow) start() {
	for _, wanted := range []bool{true, false} {
		for _, row := range f.rows {
			taken := 0
			for i := range f.n {
				if row.has[i] {
					taken++
				}
			}
			if taken == row.need {
				continue
			}
			for _, i := range f.byFewest(row) {
				if taken == row.need {
					break
				}
				if row.want[i] == wanted && !row.has[i] {
					row.has[i] = true
					f.count[i]++
					taken++
				}
			}
		}
	}
	for i := range f.n {
		f.base[i] = min(f.count[i], f.least)
	}
	byMost := make([]int, f.n)
	for i := range byMost {
		byMost[i] = i
	}
	slices.SortStableFunc(byMost, func(a, b int) int { return cmp.Compare(f.count[b], f.count[a]) })
	for _, i := range byMost {
		if f.tops < f.plus && f.count[i] > f.base[i] {
			f.top[i] = true
			f.tops++
		}
	}
}

// byFewest orders the nodes by the extras they hold, fewest first, ties
// by the row's rank.
func (f *extraFlow) byFewest(row *extraRow) []int {
	order := make([]int, f.n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(f.count[a], f.count[b]), cmp.Compare(row.rank[b], row.rank[a]))
	})
	return order
}

// excessOf is the extras node i holds beyond its base and top.
func (f *extraFlow) excessOf(i int) int {
	return f.count[i] - f.base[i] - b2i(f.top[i])
}

func (f *extraFlow) excess() int {
	sum := 0
	for i := range f.n {
		sum += f.excessOf(i)
	}
	return sum
}

// tally adds (sign 1) or takes away (-1) row r's moves in pairs.
func (f *extraFlow) tally(r, sign int) {
	row := f.rows[r]
	for x := range f.n {
		if !row.has[x] {
			continue
		}
		for y := range f.n {
			if !row.has[y] {
				f.pairs[(x*f.n+y)*3+row.moveCost(x, y)+1] += sign
			}
		}
	}
}

// cheapest is the cost of the cheapest row move from x to y, and how many
// rows have it; none (0 rows) if no row holds an extra on x and none on y.
func (f *extraFlow) cheapest(x, y int) (cost, rows int) {
	for c := -1; c <= 1; c++ {
		if k := f.pairs[(x*f.n+y)*3+c+1]; k > 0 {
			return c, k
		}
	}
	return 0, 0
}

// step is how a path reached a vertex: from which, and whether by moving
// a row's extra (not a base or plus place taking or giving one).
type step struct {
	from  int
	byRow bool
}

// augment moves excess extras along the cheapest path to a place that
// takes them (Bellman-Ford: a step can gain), as many as the path has
// room for. It reports whether it found one.
func (f *extraFlow) augment() bool {
	const far = math.MaxInt
	dist := make([]int, f.n+2)
	prev := make([]step, f.n+2)
	for v := range dist {
		dist[v], prev[v] = far, step{from: -1}
		if v < f.n && f.excessOf(v) > 0 {
			dist[v] = 0
		}
	}
	relax := func(from, to, cost int, byRow bool) bool {
		if dist[from] == far || dist[from]+cost >= dist[to] {
			return false
		}
		dist[to], prev[to] = dist[from]+cost, step{from, byRow}
		return true
	}
	for range f.n + 2 {
		changed := false
		for x := range f.n {
			for y := range f.n {
				if cost, rows := f.cheapest(x, y); rows > 0 {
					changed = relax(x, y, cost, true) || changed
				}
			}
			if f.base[x] < f.least {
				changed = relax(x, f.sink(), 0, false) || changed
			}
			if !f.top[x] {
				changed = relax(x, f.pool(), 0, false) || changed
			} else {
				changed = relax(f.pool(), x, 0, false) || changed
			}
		}
		if f.tops < f.plus {
			changed = relax(f.pool(), f.sink(), 0, false) || changed
		}
		if !changed {
			break
		}
	}
	if dist[f.sink()] == far {
		return false
	}
	var path []int // from the sink back to the source
	for v := f.sink(); v >= 0; v = prev[v].from {
		path = append(path, v)
	}
	units := f.excessOf(path[len(path)-1])
	for k := 0; k+1 < len(path); k++ {
		from, to := path[k+1], path[k]
		switch {
		case prev[to].byRow:
			_, rows := f.cheapest(from, to)
			units = min(units, rows)
		case to == f.sink() && from != f.pool():
			units = min(units, f.least-f.base[from])
		default: // a plus place taken or given: one at a time
			units = 1
		}
	}
	for range units {
		for k := 0; k+1 < len(path); k++ {
			f.apply(path[k+1], path[k], prev[path[k]].byRow)
		}
	}
	return true
}

// apply takes one step of a path, from vertex from to vertex to.
func (f *extraFlow) apply(from, to int, byRow bool) {
	switch {
	case byRow:
		cost, _ := f.cheapest(from, to)
		for r, row := range f.rows {
			if row.has[from] && !row.has[to] && row.moveCost(from, to) == cost {
				f.tally(r, -1)
				row.has[from], row.has[to] = false, true
				f.tally(r, 1)
				break
			}
		}
		f.count[from]--
		f.count[to]++
	case to == f.sink() && from == f.pool():
		f.tops++
	case to == f.sink():
		f.base[from]++
	case to == f.pool():
		f.top[from] = true
	default: // from the pool: to gives its plus place up
		f.top[to] = false
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
