package nodedir

import (
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/storage"
)

// Updates merge by node ID, and a directory loaded from the same engine
// (a restarted node) knows what the last one learnt.
func TestUpdateMergesAndPersists(t *testing.T) {
	eng := storage.NewMem()
	d := New(eng)
	if _, ok := d.Get(1); ok {
		t.Fatal("an empty engine's directory knows node 1")
	}
	d.Update([]*tidekvpb.NodeDescriptor{{NodeId: 2, GrpcAddr: "b:1"}, {NodeId: 1, GrpcAddr: "a:1"}})
	d.Update([]*tidekvpb.NodeDescriptor{{NodeId: 2, GrpcAddr: "b:2"}})
	again := New(eng)
	for _, dir := range []*Dir{d, again} {
		if a, ok := dir.Addr(1); !ok || a != "a:1" {
			t.Fatalf("node 1 at %q %v", a, ok)
		}
		if a, _ := dir.Addr(2); a != "b:2" {
			t.Fatalf("node 2 at %q, want its newer address", a)
		}
		if l := dir.List(); len(l) != 2 || l[0].GetNodeId() != 1 || l[1].GetNodeId() != 2 {
			t.Fatalf("list %v, want nodes 1 and 2 in order", l)
		}
	}
}
