package server

import (
	"context"
	"net/http"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/cache"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/keyspaces"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/metarange"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Key spaces (docs/keyspaces.md): the admin RPCs that create, list and
// publish them (answered by internal/metarange), and the wiring of the node's key spaces (internal/keyspaces: its
// copy of the catalogue, which the Redis front end (SELECT), the KV API
// and the metrics read, refreshed from the meta range on a miss).

// ksNode is the node as its key spaces (internal/keyspaces) see it.
type ksNode struct {
	s      *Server
	origin *http.Client // read-through's calls to miss handlers
}

func (n ksNode) NodeID() uint64                            { return n.s.id.node }
func (n ksNode) Replicas() []*raftstore.Replica            { return n.s.store.Replicas() }
func (n ksNode) Replica(rangeID uint64) *raftstore.Replica { return n.s.store.GetReplica(rangeID) }
func (n ksNode) LookupKey(key []byte) *raftstore.Replica   { return n.s.store.LookupKey(key) }
func (n ksNode) RecountAfter() uint64                      { return n.s.sizes.RecountAfter() }
func (n ksNode) Refresh(ctx context.Context) error         { _, err := n.s.listKeySpaces(ctx); return err }

func (n ksNode) Size(ctx context.Context, r *raftstore.Replica, recountAfter uint64) (raftstore.DataSize, error) {
	return n.s.sizes.Size(ctx, r, recountAfter)
}

func (n ksNode) ExactSize(ctx context.Context, r *raftstore.Replica) (raftstore.DataSize, error) {
	return n.s.sizes.ExactSize(ctx, r)
}

func (n ksNode) Fetch(ctx context.Context, handler string, key []byte) ([]byte, bool, error) {
	return cache.Fetch(ctx, n.origin, handler, key, n.s.cfg.Limits.MaxValueSize)
}

// checkKeySpace and scanEnd are the key spaces' checks of a request, their
// refusals answered as INVALID_ARGUMENT statuses by the handlers that
// return them as they are (invalidError).
func (s *Server) checkKeySpace(ctx context.Context, name string, keys ...[]byte) error {
	return invalidAtEdge(s.ks.Check(ctx, name, keys...))
}

func (s *Server) scanEnd(ctx context.Context, name string, start, end []byte, hashOrder bool) ([]byte, error) {
	end, err := s.ks.ScanEnd(ctx, name, start, end, hashOrder)
	return end, invalidAtEdge(err)
}

// invalidAtEdge makes a key space's refusal (kverr's INVALID_ARGUMENT,
// not wrapped) an invalidError; other errors, such as a failed refresh of
// the catalogue, pass as they are.
func invalidAtEdge(err error) error {
	if k, ok := err.(*kverr.Error); ok && k.Kind() == kverr.InvalidArgument {
		return invalidError{err}
	}
	return err
}

// CreateKeySpace adds a key space to the catalogue; placement then splits
// ranges at its bounds (metarange.Handlers.CreateKeySpace).
func (a *adminService) CreateKeySpace(ctx context.Context, req *tidekvpb.CreateKeySpaceRequest) (*tidekvpb.CreateKeySpaceResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := onMeta(ctx, s, req, metarange.Handlers.CreateKeySpace, tidekvpb.AdminClient.CreateKeySpace)
	return resp, s.toStatus(err)
}

// PublishKeySpaces gives a restore's staged key spaces their names, all
// at once (metarange.Handlers.PublishKeySpaces).
func (a *adminService) PublishKeySpaces(ctx context.Context, req *tidekvpb.PublishKeySpacesRequest) (*tidekvpb.PublishKeySpacesResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := onMeta(ctx, s, req, metarange.Handlers.PublishKeySpaces, tidekvpb.AdminClient.PublishKeySpaces)
	return resp, s.toStatus(err)
}

// ListKeySpaces lists the key spaces with what they hold.
func (a *adminService) ListKeySpaces(ctx context.Context, req *tidekvpb.ListKeySpacesRequest) (*tidekvpb.ListKeySpacesResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	resp, err := a.s.listKeySpaces(ctx)
	return resp, a.s.toStatus(err)
}

// listKeySpaces lists the key spaces from the meta leaseholder and
// refreshes this node's copy of the catalogue with them.
func (s *Server) listKeySpaces(ctx context.Context) (*tidekvpb.ListKeySpacesResponse, error) {
	resp, err := adminroute.Meta(ctx, s.peers.route, s.metaRange().ListKeySpaces, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.ListKeySpacesResponse, error) {
		return c.ListKeySpaces(ctx, &tidekvpb.ListKeySpacesRequest{})
	})
	if err == nil {
		var ks []ksconfig.KeySpace
		for _, k := range resp.GetKeyspaces()[min(1, len(resp.GetKeyspaces())):] {
			ks = append(ks, ksconfig.FromAPI(k))
		}
		s.ks.Set(ksconfig.NewCatalogue(ks))
	}
	return resp, err
}

// placeKeySpaces gives placement the key spaces (internal/keyspaces'
// Place) as this node's copy of the meta range holds them (meta
// leaseholder).
func (s *Server) placeKeySpaces(obs *control.Observation) {
	cat, err := keyspaces.ReadCatalogue(s.ks.Engine())
	if err != nil {
		return
	}
	s.ks.Place(obs, cat, s.meta.table)
}
