package server

import (
	"context"
	"strings"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
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

// Settings changes cluster settings (all or none) and lists them.
func (a *adminService) Settings(ctx context.Context, req *tidekvpb.SettingsRequest) (*tidekvpb.SettingsResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := adminroute.Meta(ctx, s.peers.route, func(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.SettingsResponse, error) {
		return s.settingsLocal(ctx, meta, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.SettingsResponse, error) {
		return c.Settings(ctx, req)
	})
	return resp, s.toStatus(err)
}

func (s *Server) settingsLocal(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.SettingsRequest) (*tidekvpb.SettingsResponse, error) {
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	current, err := raftstore.ReadMetaSettings(s.ks.Engine())
	if err != nil {
		return nil, err
	}
	if len(req.GetSet()) > 0 {
		merged := map[string]string{}
		for _, st := range current {
			merged[st.GetKey()] = st.GetValue()
		}
		for _, st := range req.GetSet() {
			if !settings.Known(st.GetKey()) {
				return nil, invalidArg("unknown setting %q (known: %s)", st.GetKey(), strings.Join(settings.Names(), ", "))
			}
			merged[st.GetKey()] = st.GetValue()
		}
		var all []*tidekvpb.Setting
		for k, v := range merged {
			if v != "" {
				all = append(all, &tidekvpb.Setting{Key: k, Value: v})
			}
		}
		if _, err := settings.Apply(s.baseConfig(), all); err != nil {
			return nil, invalidArg("%v", err)
		}
		for _, st := range req.GetSet() {
			if _, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{SetSetting: st}); err != nil {
				return nil, err
			}
			value := st.GetValue()
			if value == "" {
				value = "the default"
			}
			s.events.Record("setting", "cluster", "%s set to %s by an operator", st.GetKey(), value)
		}
		s.sizes.Poke() // Θmax may have changed: the write budgets here follow at once
		if current, err = raftstore.ReadMetaSettings(s.ks.Engine()); err != nil {
			return nil, err
		}
	}
	return &tidekvpb.SettingsResponse{Settings: current}, nil
}
