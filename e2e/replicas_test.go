package e2e

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// voterNodes lists the nodes holding a voter of d.
func voterNodes(d *tidekvpb.RangeDescriptor) []uint64 {
	var out []uint64
	for _, r := range d.GetReplicas() {
		if r.GetType() == tidekvpb.ReplicaType_VOTER {
			out = append(out, r.GetNodeId())
		}
	}
	return out
}

// hasOnlyVoters reports whether d's replicas are all voters, on exactly the
// nodes want (in any order).
func hasOnlyVoters(d *tidekvpb.RangeDescriptor, want []uint64) bool {
	got := voterNodes(d)
	if len(got) != len(d.GetReplicas()) || len(got) != len(want) {
		return false
	}
	for _, n := range want {
		if !slices.Contains(got, n) {
			return false
		}
	}
	return true
}

// TestCtlMoveReplica moves a replica onto the fourth node of a 4-node
// cluster with `tidekv ctl add-replica` and `remove-replica` (and back with
// `move-replica`), checks the result in `ctl ranges --json`, and checks that removing a voter from a
// range with only the replication factor's 3 left fails with exit code 2
// and a message naming the replication factor.
func TestCtlMoveReplica(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 4})
	ctx := testCtx(t, 2*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)
	bin := testcluster.Binary(t)

	key := func(i int) []byte { return []byte(fmt.Sprintf("move/%03d", i)) }
	const n = 50
	for i := range n {
		if err := eventually(ctx, 10*time.Second, func(ctx context.Context) error {
			return cl.Put(ctx, key(i), key(i))
		}); err != nil {
			t.Fatalf("put %s: %v", key(i), err)
		}
	}

	// ctlRun runs ctl against a given node with a bound of its own.
	ctlRun := func(ctx context.Context, node int, args ...string) (string, int, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return ctl(cctx, bin, tc.Addr(node), append([]string{"--timeout", "25s"}, args...)...)
	}
	// rangesJSON parses `ctl ranges --json`.
	rangesJSON := func(ctx context.Context) (*tidekvpb.RangesResponse, error) {
		out, code, err := ctlRun(ctx, 1, "ranges", "--json")
		if err != nil {
			return nil, fmt.Errorf("exit %d: %w", code, err)
		}
		var resp tidekvpb.RangesResponse
		if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
			return nil, fmt.Errorf("ctl ranges --json: %v\n%s", err, out)
		}
		return &resp, nil
	}

	resp, err := rangesJSON(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ri := rangeFor(resp, key(0))
	if ri == nil {
		t.Fatalf("no range covers %s in %v", key(0), resp)
	}
	d := ri.GetDesc()
	rid := d.GetRangeId()
	before := voterNodes(d)
	var to, from uint64
	for i := 1; i <= tc.N(); i++ {
		if id := tc.NodeID(i); !slices.Contains(before, id) {
			to = id
		}
	}
	for _, v := range before {
		if v != ri.GetLeaderNodeId() {
			from = v
			break
		}
	}
	if to == 0 || from == 0 || len(before) != 3 {
		t.Fatalf("range %d: voters %v, leaseholder %d: want 3 voters and a free node", rid, before, ri.GetLeaderNodeId())
	}
	want := append(slices.DeleteFunc(slices.Clone(before), func(n uint64) bool { return n == from }), to)
	rs, ns := fmt.Sprint(rid), fmt.Sprint(to)
	t.Logf("range %d on nodes %v (leaseholder %d): moving node %d's replica to node %d", rid, before, ri.GetLeaderNodeId(), from, to)

	// add-replica, through a node that is not the leaseholder, in JSON: the
	// answer is the new descriptor.
	via := tc.IndexOf(from)
	out, code, err := ctlRun(ctx, via, "--json", "add-replica", rs, ns)
	if err != nil {
		t.Fatalf("ctl add-replica %s %s: exit %d: %v", rs, ns, code, err)
	}
	var added tidekvpb.RangeDescriptor
	if err := protojson.Unmarshal([]byte(out), &added); err != nil {
		t.Fatalf("ctl add-replica --json: %v\n%s", err, out)
	}
	if !hasOnlyVoters(&added, append(slices.Clone(before), to)) {
		t.Fatalf("after add-replica: %v, want voters on %v and %d", &added, before, to)
	}

	// remove-replica, in the human format: a table naming the range.
	out, code, err = ctlRun(ctx, tc.IndexOf(to), "remove-replica", rs, fmt.Sprintf("n%d", from))
	if err != nil {
		t.Fatalf("ctl remove-replica %s n%d: exit %d: %v", rs, from, code, err)
	}
	t.Logf("ctl remove-replica:\n%s", out)
	if !strings.Contains(out, "RANGE") || !strings.Contains(out, fmt.Sprintf("n%d(v)", to)) || strings.Contains(out, fmt.Sprintf("n%d(", from)) {
		t.Errorf("remove-replica output does not show the range on node %d without node %d:\n%s", to, from, out)
	}

	// The directory learns the change from the leaseholder.
	if err := eventually(ctx, 15*time.Second, func(ctx context.Context) error {
		resp, err := rangesJSON(ctx)
		if err != nil {
			return err
		}
		var r *tidekvpb.RangeInfo
		for _, x := range resp.GetRanges() {
			if x.GetDesc().GetRangeId() == rid {
				r = x
			}
		}
		if r == nil || !hasOnlyVoters(r.GetDesc(), want) {
			return fmt.Errorf("ctl ranges --json shows range %d as %v, want voters on %v", rid, r.GetDesc(), want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Three voters is the replication factor: no further removal.
	out, code, err = ctlRun(ctx, 1, "remove-replica", rs, fmt.Sprint(want[0]))
	if code != 2 || err == nil || !strings.Contains(err.Error(), "replication factor") {
		t.Fatalf("ctl remove-replica below the replication factor: exit %d, %v (stdout %q); want exit 2 naming the replication factor", code, err, out)
	}
	t.Logf("refused as expected: %v", err)
	resp, err = rangesJSON(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rangeFor(resp, key(0)); r == nil || !hasOnlyVoters(r.GetDesc(), want) {
		t.Fatalf("refused removal changed the range: %v", r)
	}

	// move-replica: back from the new node to the old one in one joint
	// change; the range never has fewer than three voters.
	out, code, err = ctlRun(ctx, 1, "--json", "move-replica", rs, fmt.Sprint(to), fmt.Sprint(from))
	if code != 0 || err != nil {
		t.Fatalf("ctl move-replica %s %d %d: exit %d: %v", rs, to, from, code, err)
	}
	var moved tidekvpb.RangeDescriptor
	if err := protojson.Unmarshal([]byte(out), &moved); err != nil {
		t.Fatalf("ctl move-replica --json: %v\n%s", err, out)
	}
	if !hasOnlyVoters(&moved, before) {
		t.Fatalf("after move-replica: %v, want voters on %v", &moved, before)
	}

	// The data survived the moves.
	for i := range n {
		var v []byte
		if err := eventually(ctx, 10*time.Second, func(ctx context.Context) (err error) {
			v, err = cl.Get(ctx, key(i))
			return err
		}); err != nil || !bytes.Equal(v, key(i)) {
			t.Fatalf("get %s = %q, %v", key(i), v, err)
		}
	}
}
