package nemesis

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// observeWithin bounds how long a layout operation's effect is looked for
// in the range directory once the call returned: the directory hears of a
// split, merge or lease transfer from the leaseholder's next report.
const observeWithin = 5 * time.Second

// LayoutCounts counts the layout operations of one kind: asked of the
// cluster, and made, seen in the range directory afterwards (a call that
// returned without error but left no trace there is not made).
type LayoutCounts struct {
	Asked int `json:"asked"`
	Made  int `json:"made"`
}

// SplitRange splits the range holding the key pick chooses (pickSplit)
// and counts the split made once the directory shows a range starting at
// that key. A refusal is logged and counted, not returned.
func (t launcherTarget) SplitRange(ctx context.Context, pick uint64) error {
	resp, err := t.cl.Ranges(ctx)
	if err != nil {
		t.layoutDone(RangeSplit, fmt.Sprintf("reading the ranges: %v", err), false)
		return nil
	}
	key, ok := pickSplit(resp, t.keys, pick)
	if !ok {
		t.logf("    range split: every candidate key starts a range already")
		return nil
	}
	_, err = t.cl.Split(ctx, []byte(key))
	made := err == nil && t.observe(func(resp *tidekvpb.RangesResponse) bool {
		return slices.ContainsFunc(resp.GetRanges(), func(ri *tidekvpb.RangeInfo) bool { return string(ri.GetDesc().GetStartKey()) == key })
	})
	t.layoutDone(RangeSplit, fmt.Sprintf("split at %q: %v", key, orOK(err)), made)
	return nil
}

// MergeRange merges the range pick chooses (pickMerge) with its right
// neighbour and counts the merge made once the directory shows the left
// range reaching past the neighbour's start. A merge needs both ranges on
// the same voters, which the rebalancer rarely leaves two neighbours on
// (it spreads a split's halves), so the neighbour's voters are first
// moved to the left range's nodes, as an operator would.
func (t launcherTarget) MergeRange(ctx context.Context, pick uint64) error {
	resp, err := t.cl.Ranges(ctx)
	if err != nil {
		t.layoutDone(Merge, fmt.Sprintf("reading the ranges: %v", err), false)
		return nil
	}
	left, right, ok := pickMerge(resp, t.keys, pick)
	if !ok {
		t.logf("    merge: no two neighbouring ranges of the workload's keys have voters alone: %s", layoutString(resp))
		return nil
	}
	for _, mv := range colocate(left, right) {
		if _, err = t.cl.ChangeReplicas(ctx, right.GetRangeId(), mv[0], mv[1]); err != nil {
			err = fmt.Errorf("moving range %d's voter from node ID %d to %d, beside range %d's: %w", right.GetRangeId(), mv[1], mv[0], left.GetRangeId(), err)
			break
		}
	}
	if err == nil {
		_, err = t.cl.Merge(ctx, left.GetRangeId())
	}
	made := err == nil && t.observe(func(resp *tidekvpb.RangesResponse) bool {
		return slices.ContainsFunc(resp.GetRanges(), func(ri *tidekvpb.RangeInfo) bool {
			d := ri.GetDesc()
			return d.GetRangeId() == left.GetRangeId() && !bytes.Equal(d.GetEndKey(), left.GetEndKey())
		})
	})
	t.layoutDone(Merge, fmt.Sprintf("merge of range %d with range %d at %q: %v", left.GetRangeId(), right.GetRangeId(), left.GetEndKey(), orOK(err)), made)
	return nil
}

// colocate are the voter moves, each {add, remove}, that put right's
// voters on left's nodes.
func colocate(left, right *tidekvpb.RangeDescriptor) [][2]uint64 {
	lv, _ := voters(left)
	rv, _ := voters(right)
	var add, remove []uint64
	for _, n := range lv {
		if !slices.Contains(rv, n) {
			add = append(add, n)
		}
	}
	for _, n := range rv {
		if !slices.Contains(lv, n) {
			remove = append(remove, n)
		}
	}
	var moves [][2]uint64
	for i := range min(len(add), len(remove)) {
		moves = append(moves, [2]uint64{add[i], remove[i]})
	}
	return moves
}

// TransferLease moves the lease of the range pick chooses (pickTransfer)
// to node to and counts it made once the directory names to its
// leaseholder.
func (t launcherTarget) TransferLease(ctx context.Context, to int, pick uint64) error {
	resp, err := t.cl.Ranges(ctx)
	if err != nil {
		t.layoutDone(LeaseTransfer, fmt.Sprintf("reading the ranges: %v", err), false)
		return nil
	}
	id := t.ids.get(to)
	rangeID, ok := pickTransfer(resp, t.keys, id, pick)
	if !ok {
		t.logf("    lease transfer to node %d: it holds no voter without the lease", to)
		return nil
	}
	err = t.cl.TransferLease(ctx, rangeID, id)
	made := err == nil && t.observe(func(resp *tidekvpb.RangesResponse) bool {
		return slices.ContainsFunc(resp.GetRanges(), func(ri *tidekvpb.RangeInfo) bool {
			return ri.GetDesc().GetRangeId() == rangeID && ri.GetLeaderNodeId() == id
		})
	})
	t.layoutDone(LeaseTransfer, fmt.Sprintf("lease of range %d to node ID %d: %v", rangeID, id, orOK(err)), made)
	return nil
}

// observe polls the range directory for up to observeWithin, however
// long the operation took, until seen holds.
func (t launcherTarget) observe(seen func(*tidekvpb.RangesResponse) bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), observeWithin)
	defer cancel()
	for {
		if resp, err := t.cl.Ranges(ctx); err == nil && seen(resp) {
			return true
		}
		if sleep(ctx, 100*time.Millisecond) != nil {
			return false
		}
	}
}

func (t launcherTarget) layoutDone(k Kind, what string, made bool) {
	t.logf("    %s (made: %v)", what, made)
	t.ops.mu.Lock()
	defer t.ops.mu.Unlock()
	c := t.ops.layout[k]
	c.Asked++
	if made {
		c.Made++
	}
	t.ops.layout[k] = c
}

// keySpan is the span the workload's keys lie in: from the first to just
// past the last (its "~" point, which pickSplit may split at).
func keySpan(keys []string) (lo, hi string) {
	return slices.Min(keys), slices.Max(keys) + "~"
}

// pickSplit chooses, by pick, one of the workload's keys or the points
// just after them (key + "~", before the next key) that starts no range.
func pickSplit(resp *tidekvpb.RangesResponse, keys []string, pick uint64) (string, bool) {
	var cands []string
	for _, k := range keys {
		cands = append(cands, k, k+"~")
	}
	slices.Sort(cands)
	cands = slices.DeleteFunc(cands, func(k string) bool {
		return slices.ContainsFunc(resp.GetRanges(), func(ri *tidekvpb.RangeInfo) bool { return string(ri.GetDesc().GetStartKey()) == k })
	})
	if len(cands) == 0 {
		return "", false
	}
	return cands[pick%uint64(len(cands))], true
}

// pickMerge chooses, by pick, a range whose start and end lie in the
// workload's span, and its right neighbour, both with as many voters and
// no other replica (a learner is a replica in flux; a merge refuses it);
// ranges outside the span (the system's) are left alone.
func pickMerge(resp *tidekvpb.RangesResponse, keys []string, pick uint64) (left, right *tidekvpb.RangeDescriptor, ok bool) {
	lo, hi := keySpan(keys)
	in := func(k []byte) bool { return string(k) >= lo && string(k) <= hi }
	byStart := map[string]*tidekvpb.RangeDescriptor{}
	for _, ri := range resp.GetRanges() {
		byStart[string(ri.GetDesc().GetStartKey())] = ri.GetDesc()
	}
	var cands []*tidekvpb.RangeDescriptor
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		if !in(d.GetStartKey()) || len(d.GetEndKey()) == 0 || !in(d.GetEndKey()) {
			continue
		}
		if r := byStart[string(d.GetEndKey())]; r != nil && r.GetMergingInto() == 0 && mergeable(d, r) {
			cands = append(cands, d)
		}
	}
	if len(cands) == 0 {
		return nil, nil, false
	}
	slices.SortFunc(cands, func(a, b *tidekvpb.RangeDescriptor) int { return bytes.Compare(a.GetStartKey(), b.GetStartKey()) })
	left = cands[pick%uint64(len(cands))]
	return left, byStart[string(left.GetEndKey())], true
}

// mergeable reports whether a and b have voters alone, as many of them.
func mergeable(a, b *tidekvpb.RangeDescriptor) bool {
	va, oa := voters(a)
	vb, ob := voters(b)
	return oa && ob && len(va) > 0 && len(va) == len(vb)
}

// voters are d's voters' node IDs, sorted, and whether d has no other
// replica.
func voters(d *tidekvpb.RangeDescriptor) (ids []uint64, only bool) {
	only = true
	for _, rd := range d.GetReplicas() {
		if rd.GetType() != tidekvpb.ReplicaType_VOTER {
			only = false
			continue
		}
		ids = append(ids, rd.GetNodeId())
	}
	slices.Sort(ids)
	return ids, only
}

// pickTransfer chooses, by pick, a range overlapping the workload's span
// with a voter on node to that does not hold its lease (in range ID
// order).
func pickTransfer(resp *tidekvpb.RangesResponse, keys []string, to uint64, pick uint64) (uint64, bool) {
	lo, hi := keySpan(keys)
	var cands []uint64
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		overlaps := string(d.GetStartKey()) <= hi && (len(d.GetEndKey()) == 0 || string(d.GetEndKey()) > lo)
		if ids, _ := voters(d); overlaps && ri.GetLeaderNodeId() != to && slices.Contains(ids, to) {
			cands = append(cands, d.GetRangeId())
		}
	}
	if len(cands) == 0 {
		return 0, false
	}
	slices.Sort(cands)
	return cands[pick%uint64(len(cands))], true
}

// layoutString describes resp's ranges for a log line: each range's start
// and its replicas' nodes, a learner's marked L.
func layoutString(resp *tidekvpb.RangesResponse) string {
	var b strings.Builder
	for _, ri := range resp.GetRanges() {
		fmt.Fprintf(&b, "[%q", ri.GetDesc().GetStartKey())
		for _, rd := range ri.GetDesc().GetReplicas() {
			fmt.Fprintf(&b, " %d", rd.GetNodeId())
			if rd.GetType() != tidekvpb.ReplicaType_VOTER {
				b.WriteString("L")
			}
		}
		b.WriteString("]")
	}
	return b.String()
}
