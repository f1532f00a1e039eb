package metarange

import (
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

func TestNextLogVersion(t *testing.T) {
	node := func(id uint64, v uint32, draining bool) *tidekvpb.NodeDescriptor {
		return &tidekvpb.NodeDescriptor{NodeId: id, MaxLogVersion: v, Draining: draining}
	}
	holding := []*tidekvpb.RangeDescriptor{{Replicas: []*tidekvpb.ReplicaDescriptor{{NodeId: 1}, {NodeId: 3}}}}
	for _, c := range []struct {
		name   string
		active uint32
		nodes  []*tidekvpb.NodeDescriptor
		want   uint32
	}{
		{"every node new", 1, []*tidekvpb.NodeDescriptor{node(1, 2, false), node(2, 2, false)}, 2},
		{"one node old", 1, []*tidekvpb.NodeDescriptor{node(1, 2, false), node(2, 1, false)}, 1},
		{"a binary from before versions", 1, []*tidekvpb.NodeDescriptor{node(1, 2, false), node(2, 0, false)}, 1},
		{"an old draining node without replicas is not waited for", 1, []*tidekvpb.NodeDescriptor{node(1, 2, false), node(2, 0, true)}, 2},
		{"an old draining node that still holds replicas is", 1, []*tidekvpb.NodeDescriptor{node(1, 2, false), node(3, 1, true)}, 1},
		{"never lowered", 2, []*tidekvpb.NodeDescriptor{node(1, 2, false), node(2, 1, false)}, 2},
	} {
		got, why := nextLogVersion(c.active, c.nodes, holding)
		if got != c.want || (got != c.active) != (why != "") {
			t.Errorf("%s: %d (%q), want %d", c.name, got, why, c.want)
		}
	}
}
