package metarange

import (
	"context"
	"strings"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/settings"
)

// Settings changes cluster settings (all or none: each is checked by
// applying them all to the node's base configuration first) and lists
// them.
func (h Handlers) Settings(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.SettingsRequest) (*tidekvpb.SettingsResponse, error) {
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	current, err := raftstore.ReadMetaSettings(h.Node.Engine())
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
				return nil, kverr.Invalid("unknown setting %q (known: %s)", st.GetKey(), strings.Join(settings.Names(), ", "))
			}
			merged[st.GetKey()] = st.GetValue()
		}
		var all []*tidekvpb.Setting
		for k, v := range merged {
			if v != "" {
				all = append(all, &tidekvpb.Setting{Key: k, Value: v})
			}
		}
		if _, err := settings.Apply(h.Node.BaseConfig(), all); err != nil {
			return nil, kverr.Invalid("%v", err)
		}
		for _, st := range req.GetSet() {
			if _, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{SetSetting: st}); err != nil {
				return nil, err
			}
			value := st.GetValue()
			if value == "" {
				value = "the default"
			}
			h.Node.Record("setting", "cluster", "%s set to %s by an operator", st.GetKey(), value)
		}
		h.Node.SettingsChanged()
		if current, err = raftstore.ReadMetaSettings(h.Node.Engine()); err != nil {
			return nil, err
		}
	}
	return &tidekvpb.SettingsResponse{Settings: current}, nil
}
