package nodedir

import (
	"sort"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// Dir maps node IDs to their descriptors (addresses, locality). Reads are
// lock-free (the transport resolves an address per message batch); it is
// refreshed from heartbeat responses and persisted so a restarted node can
// reach its peers at once.
type Dir struct {
	mu    sync.Mutex // serializes writers
	nodes atomic.Pointer[map[uint64]*tidekvpb.NodeDescriptor]
	eng   storage.Engine
}

// New loads the directory eng persisted last (empty if none).
func New(eng storage.Engine) *Dir {
	d := &Dir{eng: eng}
	m := map[uint64]*tidekvpb.NodeDescriptor{}
	if v, ok, err := eng.Get(keys.NodeDirectoryKey); err == nil && ok {
		resp := &tidekvpb.NodeHeartbeatResponse{}
		if proto.Unmarshal(v, resp) == nil {
			for _, n := range resp.GetNodes() {
				m[n.GetNodeId()] = n
			}
		}
	}
	d.nodes.Store(&m)
	return d
}

// Get returns node id's descriptor.
func (d *Dir) Get(id uint64) (*tidekvpb.NodeDescriptor, bool) {
	n, ok := (*d.nodes.Load())[id]
	return n, ok
}

// Addr returns node id's gRPC address.
func (d *Dir) Addr(id uint64) (string, bool) {
	n, ok := d.Get(id)
	return n.GetGrpcAddr(), ok
}

// List returns every known node, by ID.
func (d *Dir) List() []*tidekvpb.NodeDescriptor {
	m := *d.nodes.Load()
	out := make([]*tidekvpb.NodeDescriptor, 0, len(m))
	for _, n := range m {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetNodeId() < out[j].GetNodeId() })
	return out
}

// Update merges nodes into the directory and persists it when it changed.
func (d *Dir) Update(nodes []*tidekvpb.NodeDescriptor) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := *d.nodes.Load()
	m := make(map[uint64]*tidekvpb.NodeDescriptor, len(old)+len(nodes))
	for k, v := range old {
		m[k] = v
	}
	changed := false
	for _, n := range nodes {
		if o, ok := m[n.GetNodeId()]; !ok || !proto.Equal(o, n) {
			m[n.GetNodeId()] = n
			changed = true
		}
	}
	if !changed {
		return
	}
	d.nodes.Store(&m)
	resp := &tidekvpb.NodeHeartbeatResponse{}
	for _, n := range m {
		resp.Nodes = append(resp.Nodes, n)
	}
	if b, err := proto.Marshal(resp); err == nil {
		batch := d.eng.NewBatch()
		_ = batch.Set(keys.NodeDirectoryKey, b)
		_ = batch.Commit(false)
		batch.Close()
	}
}
