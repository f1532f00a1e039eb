package memengine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// check verifies every B+-tree invariant: keys sorted within and across
// nodes and inside their separators' bounds, every leaf at one depth, every
// node but the root between half full and full, the leaf chain linking the
// leaves in order both ways, and the count.
func (t *btree) check() error {
	var leaves []*bnode
	leafDepth := -1
	var walk func(n *bnode, lo, hi []byte, depth int) error
	walk = func(n *bnode, lo, hi []byte, depth int) error {
		if n != t.root && (n.size() < t.order/2 || n.size() > t.order) {
			return fmt.Errorf("node of size %d outside [%d, %d]", n.size(), t.order/2, t.order)
		}
		if n.leaf() {
			if leafDepth >= 0 && depth != leafDepth {
				return fmt.Errorf("leaves at depths %d and %d", leafDepth, depth)
			}
			leafDepth = depth
			leaves = append(leaves, n)
			for i, e := range n.entries {
				if i > 0 && bytes.Compare(n.entries[i-1].key, e.key) >= 0 {
					return fmt.Errorf("leaf keys out of order at %q", e.key)
				}
				if (lo != nil && bytes.Compare(e.key, lo) < 0) || (hi != nil && bytes.Compare(e.key, hi) >= 0) {
					return fmt.Errorf("key %q outside its separators [%q, %q)", e.key, lo, hi)
				}
			}
			return nil
		}
		if len(n.seps) != len(n.children)-1 {
			return fmt.Errorf("%d separators for %d children", len(n.seps), len(n.children))
		}
		for i, c := range n.children {
			clo, chi := lo, hi
			if i > 0 {
				clo = n.seps[i-1]
			}
			if i < len(n.seps) {
				chi = n.seps[i]
			}
			if clo != nil && chi != nil && bytes.Compare(clo, chi) >= 0 {
				return fmt.Errorf("separators out of order: %q, %q", clo, chi)
			}
			if err := walk(c, clo, chi, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(t.root, nil, nil, 0); err != nil {
		return err
	}
	n := 0
	for i, l := range leaves {
		n += len(l.entries)
		var prev, next *bnode
		if i > 0 {
			prev = leaves[i-1]
		}
		if i+1 < len(leaves) {
			next = leaves[i+1]
		}
		if l.prev != prev || l.next != next {
			return fmt.Errorf("leaf %d of %d is linked out of order", i, len(leaves))
		}
	}
	if n != t.n {
		return fmt.Errorf("leaves hold %d entries, count says %d", n, t.n)
	}
	return nil
}

func (t *btree) height() int {
	h := 1
	for n := t.root; !n.leaf(); n = n.children[0] {
		h++
	}
	return h
}

func mustCheck(t *testing.T, tr *btree) {
	t.Helper()
	if err := tr.check(); err != nil {
		t.Fatal(err)
	}
}

func ikey(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }

func insertKey(x index, k []byte) { x.insert(newEntry(k, version{1, []byte("v")})) }

func TestBTreeSplitsAndMergesAtItsOrder(t *testing.T) {
	tr := newBTree(4)
	for i := range 4 {
		insertKey(tr, ikey(i))
	}
	if !tr.root.leaf() {
		t.Fatal("a tree of order 4 split before its leaf held 5 entries")
	}
	insertKey(tr, ikey(4))
	mustCheck(t, tr)
	if tr.root.leaf() || len(tr.root.children) != 2 || len(tr.root.children[0].entries) != 2 || len(tr.root.children[1].entries) != 3 {
		t.Fatal("the 5th entry did not split the leaf into 2 and 3 under a new root")
	}
	if !bytes.Equal(tr.root.seps[0], ikey(2)) {
		t.Fatalf("separator %q, want the right leaf's first key %q", tr.root.seps[0], ikey(2))
	}
	for i := 5; i < 200; i++ {
		insertKey(tr, ikey(i))
		mustCheck(t, tr)
	}
	if h := tr.height(); h < 4 {
		t.Fatalf("200 keys at order 4 make a tree of height %d; inner nodes did not split", h)
	}
	// Delete from both ends and the middle: borrowing and merging at every
	// level, down to one leaf again.
	order := rand.New(rand.NewPCG(1, 2)).Perm(200)
	for n, i := range order {
		tr.remove(tr.get(ikey(i)))
		mustCheck(t, tr)
		if tr.get(ikey(i)) != nil {
			t.Fatalf("key %d still found after remove", i)
		}
		// Two leaves need order/2 = 2 entries each.
		if left := 200 - n - 1; left < 4 && !tr.root.leaf() {
			t.Fatalf("%d keys left and the root is not a leaf: merges did not collapse the tree", left)
		}
	}
}

func TestBTreeLeafLinksSweepASpan(t *testing.T) {
	tr := newBTree(4)
	for i := range 100 {
		insertKey(tr, ikey(2*i)) // even keys only, so bounds fall between keys
	}
	mustCheck(t, tr)
	for _, tc := range []struct{ lower, upper []byte }{
		{nil, nil},
		{ikey(17), ikey(61)},
		{ikey(18), ikey(60)},
		{ikey(0), ikey(1)},
		{ikey(199), nil},
		{ikey(50), ikey(50)},
		{[]byte("z"), nil},
	} {
		var got [][]byte
		tr.scan(tc.lower, tc.upper, func(e *entry) bool { got = append(got, e.key); return true })
		var want [][]byte
		for i := 0; i < 200; i += 2 {
			if inSpan(ikey(i), tc.lower, tc.upper) {
				want = append(want, ikey(i))
			}
		}
		if !slices.EqualFunc(got, want, bytes.Equal) {
			t.Errorf("scan [%q, %q) = %q, want %q", tc.lower, tc.upper, got, want)
		}
	}
	// The sweep stops when told to.
	n := 0
	tr.scan(nil, nil, func(*entry) bool { n++; return n < 7 })
	if n != 7 {
		t.Fatalf("scan went on after fn returned false: %d calls", n)
	}
}
