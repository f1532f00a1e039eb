package server

import (
	"context"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/metarange"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/settings"
)

// baseConfig is what the node was started with, before cluster settings.
func (s *Server) baseConfig() settings.Config {
	return settings.Config{Placement: s.cfg.Placement, Autoscale: s.cfg.Autoscale, GC: s.cfg.GC}
}

// clusterConfig is the node's configuration with the cluster settings
// stored in the meta range applied (meta leaseholder only).
func (s *Server) clusterConfig() settings.Config {
	sts, err := raftstore.ReadMetaSettings(s.ks.Engine())
	if err != nil {
		return s.baseConfig()
	}
	c, err := settings.Apply(s.baseConfig(), sts)
	if err != nil {
		return s.baseConfig() // refused on write; stay safe if it slipped in
	}
	return c
}

// Settings changes cluster settings (all or none) and lists them
// (metarange.Handlers.Settings).
func (a *adminService) Settings(ctx context.Context, req *tidekvpb.SettingsRequest) (*tidekvpb.SettingsResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := onMeta(ctx, s, req, metarange.Handlers.Settings, tidekvpb.AdminClient.Settings)
	return resp, s.toStatus(err)
}
