package server

import (
	"context"
	"fmt"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// A restore's staged key spaces (docs/backup.md, "Staged restore"): a
// restore creates each key space it restores under its staging name
// (CreateKeySpaceRequest.staged), writes into it there, and publishes
// them all in one meta range change, so a reader asking for one by name
// finds nothing until it holds everything.

func (s *Server) checkStaging() error {
	if v := s.store.LogVersion(); v < raftstore.LogVersionProtectedTS {
		return fmt.Errorf("%w: staged key spaces need Raft log version %d on every node, the cluster is at %d", raftstore.ErrLogVersion, raftstore.LogVersionProtectedTS, v)
	}
	return nil
}

// PublishKeySpaces gives staged key spaces their names, all at once.
func (a *adminService) PublishKeySpaces(ctx context.Context, req *tidekvpb.PublishKeySpacesRequest) (*tidekvpb.PublishKeySpacesResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := adminroute.Meta(ctx, s.peers.route, func(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.PublishKeySpacesResponse, error) {
		return s.publishLocal(ctx, meta, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.PublishKeySpacesResponse, error) {
		return c.PublishKeySpaces(ctx, req)
	})
	return resp, s.toStatus(err)
}

func (s *Server) publishLocal(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.PublishKeySpacesRequest) (*tidekvpb.PublishKeySpacesResponse, error) {
	if err := s.checkStaging(); err != nil {
		return nil, err
	}
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	cat, err := s.metaCatalogue()
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
			return nil, invalidArg("no staged key space %q to publish", name)
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
		return nil, invalidArg("key spaces %v not published: one is no longer staged, or its name was taken meanwhile", req.GetNames())
	}
	s.events.Record("keyspace", "cluster", "restored key spaces %v published", req.GetNames())
	if cat, err := s.metaCatalogue(); err == nil {
		s.ks.Set(cat)
	}
	return &tidekvpb.PublishKeySpacesResponse{}, nil
}
