package memengine

import (
	"bytes"
	"slices"
)

// btreeOrder is the B+-tree's fan-out: the most entries a leaf, or children
// an inner node, holds. 64 keeps the tree three levels deep to about 250K
// keys while a node's binary search and shifts stay within a few cache
// lines of pointers.
const btreeOrder = 64

// btree is a B+-tree: entries live only in the leaves, in key order, and the
// leaves are linked both ways, so reading a span descends once to the leaf
// holding its start and sweeps along the links to its end (the paper's
// B+-tree migration). Inner nodes hold separators only. Nodes split when
// they overflow and, below half full, borrow from a sibling or merge with
// it, so every leaf is at the same depth.
type btree struct {
	root  *bnode
	order int
	n     int
	// path is scratch for insert and remove, which only writers call.
	path []step
}

// bnode is a leaf when children is nil.
type bnode struct {
	// Inner nodes: children[i] holds the keys k with
	// seps[i-1] <= k < seps[i].
	seps     [][]byte
	children []*bnode
	// Leaves: entries in ascending key order, and the neighbouring leaves.
	entries    []*entry
	prev, next *bnode
}

// step is one node on the way down to a leaf and the child taken there.
type step struct {
	node  *bnode
	child int
}

func newBTree(order int) *btree {
	if order < 4 {
		panic("memengine: B+-tree order below 4") // smaller orders cannot rebalance
	}
	return &btree{root: &bnode{}, order: order}
}

func (n *bnode) leaf() bool { return n.children == nil }

// size is what must stay between order/2 and order in every node but the
// root.
func (n *bnode) size() int {
	if n.leaf() {
		return len(n.entries)
	}
	return len(n.children)
}

// childFor returns the index of the child whose subtree holds key.
func (n *bnode) childFor(key []byte) int {
	i, found := slices.BinarySearchFunc(n.seps, key, bytes.Compare)
	if found {
		i++ // a separator is the smallest key of the subtree to its right
	}
	return i
}

// search returns where key is, or belongs, in a leaf.
func (n *bnode) search(key []byte) (int, bool) {
	return slices.BinarySearchFunc(n.entries, key, func(e *entry, k []byte) int { return bytes.Compare(e.key, k) })
}

func (t *btree) leafFor(key []byte) *bnode {
	n := t.root
	for !n.leaf() {
		n = n.children[n.childFor(key)]
	}
	return n
}

// descend records the way from the root to key's leaf, which comes last.
func (t *btree) descend(key []byte) []step {
	t.path = t.path[:0]
	n := t.root
	for !n.leaf() {
		i := n.childFor(key)
		t.path = append(t.path, step{n, i})
		n = n.children[i]
	}
	return append(t.path, step{node: n})
}

func (t *btree) ordered() bool { return true }

func (t *btree) bounded(lower, upper []byte) bool { return true }

func (t *btree) get(key []byte) *entry {
	leaf := t.leafFor(key)
	if i, ok := leaf.search(key); ok {
		return leaf.entries[i]
	}
	return nil
}

func (t *btree) scan(lower, upper []byte, fn func(*entry) bool) {
	leaf := t.leafFor(lower)
	i, _ := leaf.search(lower)
	for ; leaf != nil; leaf, i = leaf.next, 0 {
		for _, e := range leaf.entries[i:] {
			if upper != nil && bytes.Compare(e.key, upper) >= 0 {
				return
			}
			if !fn(e) {
				return
			}
		}
	}
}

func (t *btree) insert(e *entry) {
	path := t.descend(e.key)
	leaf := path[len(path)-1].node
	i, _ := leaf.search(e.key)
	leaf.entries = slices.Insert(leaf.entries, i, e)
	t.n++
	t.splitUp(path)
}

// splitUp splits the node at the end of path if it overflowed, and carries
// the new separator up as far as parents overflow in turn.
func (t *btree) splitUp(path []step) {
	for level := len(path) - 1; level >= 0; level-- {
		n := path[level].node
		if n.size() <= t.order {
			return
		}
		var sep []byte
		var right *bnode
		if n.leaf() {
			sep, right = t.splitLeaf(n)
		} else {
			sep, right = t.splitInner(n)
		}
		if level == 0 {
			t.root = &bnode{seps: [][]byte{sep}, children: []*bnode{n, right}}
			return
		}
		p := path[level-1]
		p.node.seps = slices.Insert(p.node.seps, p.child, sep)
		p.node.children = slices.Insert(p.node.children, p.child+1, right)
	}
}

// splitLeaf moves the upper half of n into a new leaf linked after it and
// returns that leaf and its smallest key, the separator between them.
func (t *btree) splitLeaf(n *bnode) ([]byte, *bnode) {
	mid := len(n.entries) / 2
	right := &bnode{entries: make([]*entry, len(n.entries)-mid, t.order+1)}
	copy(right.entries, n.entries[mid:])
	clear(n.entries[mid:])
	n.entries = n.entries[:mid]
	right.prev, right.next = n, n.next
	if n.next != nil {
		n.next.prev = right
	}
	n.next = right
	return right.entries[0].key, right
}

// splitInner moves the upper half of n's children into a new node; the
// separator between the halves moves up rather than staying in either.
func (t *btree) splitInner(n *bnode) ([]byte, *bnode) {
	mid := len(n.children) / 2
	sep := n.seps[mid-1]
	right := &bnode{
		seps:     append(make([][]byte, 0, t.order), n.seps[mid:]...),
		children: append(make([]*bnode, 0, t.order+1), n.children[mid:]...),
	}
	clear(n.seps[mid-1:])
	clear(n.children[mid:])
	n.seps, n.children = n.seps[:mid-1], n.children[:mid]
	return sep, right
}

func (t *btree) remove(e *entry) {
	path := t.descend(e.key)
	leaf := path[len(path)-1].node
	i, ok := leaf.search(e.key)
	if !ok {
		panic("memengine: removing a key the B+-tree does not hold")
	}
	leaf.entries = slices.Delete(leaf.entries, i, i+1)
	t.n--
	t.rebalance(path)
}

// rebalance restores the fill of the nodes on path, from the leaf up: a
// node below half full borrows from a sibling that can spare one, or else
// merges with it, which takes a child from the parent, whose fill is then
// checked in turn. A root left with one child gives way to it.
func (t *btree) rebalance(path []step) {
	minFill := t.order / 2
	for level := len(path) - 1; level > 0; level-- {
		n := path[level].node
		if n.size() >= minFill {
			return
		}
		parent, i := path[level-1].node, path[level-1].child
		switch {
		case i > 0 && parent.children[i-1].size() > minFill:
			borrowFromLeft(parent, i)
			return
		case i+1 < len(parent.children) && parent.children[i+1].size() > minFill:
			borrowFromRight(parent, i)
			return
		case i > 0:
			merge(parent, i-1)
		default:
			merge(parent, i)
		}
	}
	if !t.root.leaf() && len(t.root.children) == 1 {
		t.root = t.root.children[0]
	}
}

// borrowFromLeft moves the last entry (or child) of parent's child i-1 to
// the front of child i.
func borrowFromLeft(parent *bnode, i int) {
	left, n := parent.children[i-1], parent.children[i]
	if n.leaf() {
		last := len(left.entries) - 1
		n.entries = slices.Insert(n.entries, 0, left.entries[last])
		left.entries[last] = nil
		left.entries = left.entries[:last]
		parent.seps[i-1] = n.entries[0].key
		return
	}
	last := len(left.children) - 1
	n.children = slices.Insert(n.children, 0, left.children[last])
	n.seps = slices.Insert(n.seps, 0, parent.seps[i-1])
	parent.seps[i-1] = left.seps[last-1]
	left.children[last], left.seps[last-1] = nil, nil
	left.children, left.seps = left.children[:last], left.seps[:last-1]
}

// borrowFromRight moves the first entry (or child) of parent's child i+1 to
// the end of child i.
func borrowFromRight(parent *bnode, i int) {
	n, right := parent.children[i], parent.children[i+1]
	if n.leaf() {
		n.entries = append(n.entries, right.entries[0])
		right.entries = slices.Delete(right.entries, 0, 1)
		parent.seps[i] = right.entries[0].key
		return
	}
	n.seps = append(n.seps, parent.seps[i])
	n.children = append(n.children, right.children[0])
	parent.seps[i] = right.seps[0]
	right.seps = slices.Delete(right.seps, 0, 1)
	right.children = slices.Delete(right.children, 0, 1)
}

// merge folds parent's child j+1 into child j and drops it from parent.
func merge(parent *bnode, j int) {
	left, right := parent.children[j], parent.children[j+1]
	if left.leaf() {
		left.entries = append(left.entries, right.entries...)
		left.next = right.next
		if right.next != nil {
			right.next.prev = left
		}
	} else {
		left.seps = append(append(left.seps, parent.seps[j]), right.seps...)
		left.children = append(left.children, right.children...)
	}
	parent.seps = slices.Delete(parent.seps, j, j+1)
	parent.children = slices.Delete(parent.children, j+1, j+2)
}
