package metarange

import (
	"context"
	"fmt"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keyspaces"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Key spaces (docs/keyspaces.md) are records of the meta range: created
// here, listed with what they hold, and, for a restore, created staged and
// published later. A change is followed by the node's copy of the
// catalogue (Node.SetCatalogue).

// CreateKeySpace adds a key space to the catalogue; placement then splits
// ranges at its bounds.
func (h Handlers) CreateKeySpace(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.CreateKeySpaceRequest) (*tidekvpb.CreateKeySpaceResponse, error) {
	if v := h.Node.LogVersion(); v < raftstore.LogVersionKeySpaces {
		return nil, fmt.Errorf("%w: key spaces need Raft log version %d on every node, the cluster is at %d", raftstore.ErrLogVersion, raftstore.LogVersionKeySpaces, v)
	}
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	cat, err := keyspaces.ReadCatalogue(h.Node.Engine())
	if err != nil {
		return nil, err
	}
	set := ksconfig.FromAPI(req.GetKeyspace()).Settings
	if err := cat.CheckNew(set); err != nil {
		return nil, kverr.Invalid("key space not created: %v", err)
	}
	if req.GetStaged() {
		if err := h.checkStaging(); err != nil {
			return nil, err
		}
		set.Name = keyspace.StagingName(set.Name) // published later (PublishKeySpaces)
	}
	id, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{CreateKeyspace: keyspaces.Record(set)})
	if err != nil {
		return nil, err
	}
	if id == 0 {
		return nil, kverr.Invalid("key space not created: key space %q exists", set.Name)
	}
	k := ksconfig.KeySpace{ID: keyspace.ID(id), Settings: set}
	h.Node.Record("keyspace", "cluster", "key space %d created: %s", id, set)
	h.refreshCatalogue()
	h.Node.WakePlace() // split ranges at its bounds now rather than next round
	return &tidekvpb.CreateKeySpaceResponse{Keyspace: ksconfig.ToAPI(k)}, nil
}

// refreshCatalogue gives the node's copy of the catalogue what the meta
// range now holds.
func (h Handlers) refreshCatalogue() {
	if cat, err := keyspaces.ReadCatalogue(h.Node.Engine()); err == nil {
		h.Node.SetCatalogue(cat)
	}
}

// ListKeySpaces lists the key spaces with what they hold: bytes, keys and
// ranges from the range reports, hits, misses and evictions from the
// nodes' heartbeats.
func (h Handlers) ListKeySpaces(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.ListKeySpacesResponse, error) {
	ranges, err := h.Ranges(ctx, meta) // a lease read first
	if err != nil {
		return nil, err
	}
	cat, err := keyspaces.ReadCatalogue(h.Node.Engine())
	if err != nil {
		return nil, err
	}
	resp := &tidekvpb.ListKeySpacesResponse{}
	byID := map[keyspace.ID]*tidekvpb.KeySpace{}
	for _, k := range cat.All() {
		a := ksconfig.ToAPI(k)
		byID[k.ID] = a
		resp.Keyspaces = append(resp.Keyspaces, a)
	}
	t := keyspaces.Totals{}
	for _, ri := range ranges.GetRanges() {
		t.Add(ri.GetDesc().GetStartKey(), ri.GetBytes(), ri.GetKeys())
	}
	for id, a := range byID {
		a.Bytes, a.Keys, a.Ranges = t[id].Bytes, t[id].Keys, uint32(t[id].Ranges)
	}
	h.Node.Table().Heartbeats(func(_ uint64, hb *tidekvpb.NodeHeartbeatRequest) {
		for _, c := range hb.GetKeyspaceCounts() {
			if a := byID[keyspace.ID(c.GetId())]; a != nil {
				a.Hits, a.Misses, a.Evictions = a.Hits+c.GetHits(), a.Misses+c.GetMisses(), a.Evictions+c.GetEvictions()
			}
		}
	})
	return resp, nil
}

// A restore's staged key spaces (docs/backup.md, "Staged restore"): a
// restore creates each key space it restores under its staging name
// (CreateKeySpaceRequest.staged), writes into it there, and publishes
// them all in one meta range change, so a reader asking for one by name
// finds nothing until it holds everything.

func (h Handlers) checkStaging() error {
	if v := h.Node.LogVersion(); v < raftstore.LogVersionProtectedTS {
		return fmt.Errorf("%w: staged key spaces need Raft log version %d on every node, the cluster is at %d", raftstore.ErrLogVersion, raftstore.LogVersionProtectedTS, v)
	}
	return nil
}

// PublishKeySpaces gives staged key spaces their names, all at once.
func (h Handlers) PublishKeySpaces(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.PublishKeySpacesRequest) (*tidekvpb.PublishKeySpacesResponse, error) {
	if err := h.checkStaging(); err != nil {
		return nil, err
	}
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	cat, err := keyspaces.ReadCatalogue(h.Node.Engine())
	if err != nil {
		return nil, err
	}
	var pub []*tidekvpb.KeySpaceRecord
	for _, name := range req.GetNames() {
		k, ok := cat.ByName(keyspace.StagingName(name))
		if !ok {
			if _, done := cat.ByName(name); done {
				continue // published already: a retried request
			}
			return nil, kverr.Invalid("no staged key space %q to publish", name)
		}
		pub = append(pub, &tidekvpb.KeySpaceRecord{Id: uint32(k.ID), Name: name})
	}
	if len(pub) == 0 {
		return &tidekvpb.PublishKeySpacesResponse{}, nil
	}
	ok, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{PublishKeyspaces: pub})
	if err != nil {
		return nil, err
	}
	if ok == 0 {
		return nil, kverr.Invalid("key spaces %v not published: one is no longer staged, or its name was taken meanwhile", req.GetNames())
	}
	h.Node.Record("keyspace", "cluster", "restored key spaces %v published", req.GetNames())
	h.refreshCatalogue()
	return &tidekvpb.PublishKeySpacesResponse{}, nil
}
