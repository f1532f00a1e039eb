package txncheck

import (
	"slices"
)

// EdgeKind is a dependency between two transactions: the first must come
// before the second in any serial order that explains the history.
type EdgeKind uint8

const (
	// WW: the second overwrote (appended after) the first's write.
	WW EdgeKind = 1 << iota
	// WR: the second read the first's write.
	WR
	// RW: the second overwrote the version the first read.
	RW
	// RT: the second began after the first completed.
	RT
)

var edgeKinds = [...]EdgeKind{WW, WR, RW, RT}

func (k EdgeKind) String() string {
	switch k {
	case WW:
		return "ww"
	case WR:
		return "wr"
	case RW:
		return "rw"
	case RT:
		return "realtime"
	}
	return "?"
}

// why is the evidence of one edge: the key and the values involved (0:
// none), read by the explanation.
type why struct {
	key      string
	from, to int
}

// edge is every kind of dependency from one transaction to another, with
// the first evidence of each.
type edge struct {
	kinds EdgeKind
	whys  [len(edgeKinds)]why
}

// graph is the dependency graph over transactions 0..n-1: edges are
// added, then seal sorts each transaction's successors for the searches.
type graph struct {
	out []map[int]*edge
	adj [][]int
}

func newGraph(n int) *graph { return &graph{out: make([]map[int]*edge, n)} }

// add records a dependency from a to b; a transaction never depends on
// itself.
func (g *graph) add(a, b int, k EdgeKind, w why) {
	if a == b {
		return
	}
	if g.out[a] == nil {
		g.out[a] = map[int]*edge{}
	}
	e := g.out[a][b]
	if e == nil {
		e = &edge{}
		g.out[a][b] = e
	}
	if e.kinds&k == 0 {
		e.kinds |= k
		e.whys[kindIndex(k)] = w
	}
}

func kindIndex(k EdgeKind) int { return slices.Index(edgeKinds[:], k) }

// seal lists each transaction's successors in ascending order, so that
// searches are deterministic; no edge is added after.
func (g *graph) seal() {
	g.adj = make([][]int, len(g.out))
	for a, m := range g.out {
		for b := range m {
			g.adj[a] = append(g.adj[a], b)
		}
		slices.Sort(g.adj[a])
	}
}

func (g *graph) successors(a int) []int { return g.adj[a] }

// sccs are the strongly connected components with more than one
// transaction (Tarjan's algorithm), each sorted.
func (g *graph) sccs() [][]int {
	n := len(g.out)
	index, low := make([]int, n), make([]int, n)
	for i := range index {
		index[i] = -1
	}
	onStack := make([]bool, n)
	var stack []int
	var out [][]int
	next := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g.successors(v) {
			switch {
			case index[w] < 0:
				visit(w)
				low[v] = min(low[v], low[w])
			case onStack[w]:
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var c []int
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			c = append(c, w)
			if w == v {
				break
			}
		}
		if len(c) > 1 {
			slices.Sort(c)
			out = append(out, c)
		}
	}
	for v := range n {
		if index[v] < 0 {
			visit(v)
		}
	}
	return out
}

// step is one edge of a cycle, with the kind it is counted as.
type step struct {
	from, to int
	kind     EdgeKind
}

// maxSearches bounds the breadth-first searches of one cycle kind in one
// component: the cycle reported is the smallest among those through the
// first maxSearches candidate edges (every edge, in a component of a
// hand-built history), and any cycle found is a true anomaly.
const maxSearches = 512

// shortestCycle is the shortest cycle in comp that uses one edge of kind
// first and otherwise only edges of kinds in rest, or nil.
func (g *graph) shortestCycle(comp []int, first, rest EdgeKind) []step {
	in := make(map[int]bool, len(comp))
	for _, v := range comp {
		in[v] = true
	}
	var best []step
	searches := 0
	for _, u := range comp {
		for _, v := range g.successors(u) {
			e := g.out[u][v]
			if !in[v] || e.kinds&first == 0 {
				continue
			}
			if searches++; searches > maxSearches {
				return best
			}
			path := g.shortestPath(in, v, u, rest)
			if path == nil || best != nil && len(path)+1 >= len(best) {
				continue
			}
			best = append([]step{{u, v, first}}, path...)
			if len(best) == 2 {
				return best // no cycle is shorter
			}
		}
	}
	return best
}

// shortestPath is a shortest path from a to b inside in over edges of
// kinds, each step counted as the first of its kinds in ww, wr, rw, rt
// order (the weakest dependency that explains it).
func (g *graph) shortestPath(in map[int]bool, a, b int, kinds EdgeKind) []step {
	prev := map[int]int{a: a}
	queue := []int{a}
	for len(queue) > 0 && !hasKey(prev, b) {
		u := queue[0]
		queue = queue[1:]
		for _, v := range g.successors(u) {
			if !in[v] || hasKey(prev, v) || g.out[u][v].kinds&kinds == 0 {
				continue
			}
			prev[v] = u
			queue = append(queue, v)
		}
	}
	if !hasKey(prev, b) {
		return nil
	}
	var path []step
	for v := b; v != a; v = prev[v] {
		u := prev[v]
		path = append(path, step{u, v, weakest(g.out[u][v].kinds & kinds)})
	}
	slices.Reverse(path)
	return path
}

func hasKey(m map[int]int, k int) bool {
	_, ok := m[k]
	return ok
}

func weakest(ks EdgeKind) EdgeKind {
	for _, k := range edgeKinds {
		if ks&k != 0 {
			return k
		}
	}
	return 0
}
