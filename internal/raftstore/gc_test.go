package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
)

// ddDirectory is the range directory of the data-driven scenarios: a copy
// of what the running nodes' replicas said when it was last published,
// kept the way the meta range keeps it (the highest generation of each
// range, without descriptors a newer one overlaps).
type ddDirectory struct {
	mu    sync.Mutex
	descs []*tidekvpb.RangeDescriptor // nil: unreachable
}

func (d *ddDirectory) RangeDescriptors(context.Context) ([]*tidekvpb.RangeDescriptor, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.descs == nil {
		return nil, errors.New("meta range unreachable")
	}
	return d.descs, nil
}

func (d *ddDirectory) publish(descs []*tidekvpb.RangeDescriptor) {
	d.mu.Lock()
	d.descs = descs
	d.mu.Unlock()
}

// directoryOf keeps the newest descriptor of each range, then drops those
// a newer descriptor of another range overlaps (merged away).
func directoryOf(seen []*tidekvpb.RangeDescriptor) []*tidekvpb.RangeDescriptor {
	newest := map[uint64]*tidekvpb.RangeDescriptor{}
	for _, d := range seen {
		if o := newest[d.GetRangeId()]; o == nil || d.GetGeneration() > o.GetGeneration() {
			newest[d.GetRangeId()] = d
		}
	}
	var out []*tidekvpb.RangeDescriptor
	for _, d := range newest {
		shadowed := false
		for _, o := range newest {
			if o.GetRangeId() != d.GetRangeId() && o.GetGeneration() > d.GetGeneration() &&
				keys.Overlaps(o.GetStartKey(), o.GetEndKey(), d.GetStartKey(), d.GetEndKey()) {
				shadowed = true
			}
		}
		if !shadowed {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetRangeId() < out[j].GetRangeId() })
	return out
}

// directory publish|unpublish
func (d *ddDriver) directory(t *testing.T, td *datadriven.TestData) string {
	switch {
	case td.HasArg("unpublish"):
		d.dir.publish(nil)
		return "ok"
	case td.HasArg("publish"):
		var seen []*tidekvpb.RangeDescriptor
		for _, id := range d.tc.nodes {
			if s := d.tc.stores[id]; s != nil && !d.isolated[id] {
				for _, r := range s.Replicas() {
					if desc := r.Desc(); desc != nil {
						seen = append(seen, desc)
					}
				}
			}
		}
		descs := directoryOf(seen)
		d.dir.publish(descs)
		var out strings.Builder
		for _, desc := range descs {
			fmt.Fprintln(&out, fmtDesc(desc))
		}
		return out.String()
	}
	td.Fatalf(t, "directory: want publish or unpublish")
	return ""
}

// gc node=N
func (d *ddDriver) gc(t *testing.T, td *datadriven.TestData) string {
	s := d.tc.stores[d.uintArg(t, td, "node")]
	descs, err := d.dir.RangeDescriptors(context.Background())
	if err != nil {
		return fmtErr(err)
	}
	var out strings.Builder
	for _, rm := range s.RemoveStale(descs) {
		fmt.Fprintf(&out, "removed r%d gen=%d: %s\n", rm.RangeID, rm.Generation, rm.Reason)
	}
	if out.Len() == 0 {
		return "nothing stale"
	}
	return out.String()
}

func TestStaleReason(t *testing.T) {
	desc := func(id, gen uint64, start, end string, replicas ...uint64) *tidekvpb.RangeDescriptor {
		d := &tidekvpb.RangeDescriptor{RangeId: id, Generation: gen, StartKey: []byte(start), EndKey: []byte(end)}
		for i := 0; i+1 < len(replicas); i += 2 {
			d.Replicas = append(d.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: replicas[i], ReplicaId: replicas[i+1]})
		}
		return d
	}
	const node = 3
	// The local replica: range 5 = [c, k), generation 4, replica 3 on node 3.
	local := desc(5, 4, "c", "k", 1, 1, 2, 2, 3, 3)
	for _, tt := range []struct {
		name     string
		dir      []*tidekvpb.RangeDescriptor
		held     []uint64 // ranges with replicas on this node besides range 5
		incoming uint64   // the range whose snapshot asks
		stale    bool
	}{
		{"still a member", []*tidekvpb.RangeDescriptor{desc(5, 4, "c", "k", 1, 1, 2, 2, 3, 3)}, nil, 0, false},
		{"still a member, its own snapshot arriving", []*tidekvpb.RangeDescriptor{desc(5, 4, "c", "k", 1, 1, 2, 2, 3, 3)}, nil, 5, false},
		{"removed", []*tidekvpb.RangeDescriptor{desc(5, 6, "c", "k", 1, 1, 2, 2, 4, 4)}, nil, 0, true},
		{"removed and added again", []*tidekvpb.RangeDescriptor{desc(5, 8, "c", "k", 1, 1, 2, 2, 3, 7)}, nil, 0, true},
		{"directory behind the local change", []*tidekvpb.RangeDescriptor{desc(5, 3, "c", "z", 1, 1, 2, 2, 4, 4)}, nil, 0, false},
		{"merged into a range without this node", []*tidekvpb.RangeDescriptor{desc(2, 9, "a", "z", 1, 1, 2, 2, 4, 4)}, nil, 0, true},
		{"merged into a range with this node (merge not applied here yet)",
			[]*tidekvpb.RangeDescriptor{desc(2, 9, "a", "z", 1, 1, 2, 2, 3, 3)}, []uint64{2}, 0, false},
		// Added to the merged range while down: no replica here waits for
		// the merged-away one's data, the new one gets a snapshot of it.
		{"merged into a range with this node, without a replica here yet",
			[]*tidekvpb.RangeDescriptor{desc(2, 9, "a", "z", 1, 1, 2, 2, 3, 3)}, nil, 0, true},
		// The snapshot of the merged range carries the merge: nothing on
		// this node waits for the merged-away replica's data any more.
		{"merged into a range with this node, whose snapshot is arriving",
			[]*tidekvpb.RangeDescriptor{desc(2, 9, "a", "z", 1, 1, 2, 2, 3, 3)}, []uint64{2}, 2, true},
		{"merged into two ranges with this node, the other one's snapshot arriving",
			[]*tidekvpb.RangeDescriptor{desc(2, 9, "a", "f", 1, 1, 2, 2, 3, 3), desc(7, 10, "f", "z", 1, 1, 2, 2, 3, 5)}, []uint64{2}, 7, false},
		{"merged into two ranges with this node, neither held here",
			[]*tidekvpb.RangeDescriptor{desc(2, 9, "a", "f", 1, 1, 2, 2, 3, 3), desc(7, 10, "f", "z", 1, 1, 2, 2, 3, 5)}, nil, 7, true},
		{"unknown to the directory (a split's new half not reported yet)",
			[]*tidekvpb.RangeDescriptor{desc(2, 3, "a", "c", 1, 1, 2, 2, 4, 4)}, nil, 2, false},
		{"only older ranges over the span", []*tidekvpb.RangeDescriptor{desc(2, 2, "a", "z", 1, 1, 2, 2, 4, 4)}, nil, 0, false},
		// The meta range's empty bounds span its own key space, not the
		// user keys: that this node holds a newer meta replica says
		// nothing about a user range merged away.
		{"merged away, the meta range on this node",
			[]*tidekvpb.RangeDescriptor{desc(1, 12, "", "", 1, 1, 2, 2, 3, 3), desc(2, 9, "a", "z", 1, 1, 2, 2, 4, 4)}, nil, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			held := map[uint64]bool{5: true}
			for _, id := range tt.held {
				held[id] = true
			}
			dir := indexDirectory(tt.dir, held)
			dir.incoming = tt.incoming
			why := staleReason(local, 3, node, dir)
			if (why != "") != tt.stale {
				t.Fatalf("stale = %q, want stale %v", why, tt.stale)
			}
		})
	}
}

// A snapshot that overlaps a local replica the range directory still
// lists as a member is refused and counted (tidekv_snapshots_refused_overlap_total);
// once the directory shows that replica stale, the next snapshot replaces
// it, and the counter does not move again. Node 3 comes back with range
// 2's old span after range 2 moved off it and split: the snapshot of range
// 3 that its new learner needs overlaps it. The refusal is reached for
// sure: the directory is published only after node 3 has refused one. Every
// refusal node 3's store made is counted as an overlap (nothing else was
// refused), and no other node refused anything.
func TestSnapshotOverlapRefusalCounted(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("a", "1")
	tc.put("n", "2")
	n4 := tc.addNode()
	tc.crash(3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tc.leader(testRangeID).ChangeReplicas(ctx, n4, 3); err != nil {
		t.Fatal(err)
	}
	tc.splitAt(t, "m", 3)
	tc.restart(3)

	// The directory as node 3 last knew it: its range 2 a member.
	var dir ddDirectory
	dir.publish([]*tidekvpb.RangeDescriptor{tc.stores[3].GetReplica(testRangeID).Desc()})
	tc.stores[3].SetRangeDirectory(&dir)
	n3 := &snapCounters{}
	tc.net.Register(3, countingHandler{s: tc.stores[3], c: n3})

	added := make(chan error, 1)
	go func() {
		_, err := tc.leader(3).ChangeReplicas(ctx, 3, 0)
		added <- err
	}()
	waitFor(t, func() bool { return n3.refused.Load() > 0 })
	if got := tc.stores[3].Stats().SnapshotsRefusedOverlap.Load(); got == 0 {
		t.Fatalf("node 3 refused %d snapshots, %d counted as overlaps", n3.refused.Load(), got)
	}

	var seen []*tidekvpb.RangeDescriptor
	for _, id := range []uint64{1, 2, n4} {
		for _, r := range tc.stores[id].Replicas() {
			seen = append(seen, r.Desc())
		}
	}
	dir.publish(directoryOf(seen))
	if err := <-added; err != nil {
		t.Fatalf("adding node 3 to range 3 once its range 2 shows stale: %v", err)
	}
	if got := tc.stores[3].GetReplica(testRangeID); got != nil {
		t.Fatalf("node 3 still holds range 2 (%s)", FormatReplicas(got.Desc()))
	}
	refused, counted := n3.refused.Load(), tc.stores[3].Stats().SnapshotsRefusedOverlap.Load()
	if n3.accepted.Load() == 0 || uint64(refused) != counted {
		t.Fatalf("node 3: %d snapshots accepted, %d refused, %d counted as overlaps", n3.accepted.Load(), refused, counted)
	}
	for _, id := range []uint64{1, 2, n4} {
		if got := tc.stores[id].Stats().SnapshotsRefusedOverlap.Load(); got != 0 {
			t.Errorf("node %d counted %d overlap refusals", id, got)
		}
	}
	t.Logf("node 3 refused %d snapshots (all overlaps) before accepting %d", refused, n3.accepted.Load())
}
