package server

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/queue"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/units"
)

// Cluster settings override placement's configuration, the autoscale
// policy and gc-ttl at runtime, for the whole cluster: they live in the
// meta range, and the controller reads them every round (gc-ttl reaches
// every node in its heartbeat's answer). `tidekv ctl config` lists
// and changes them; `tidekv ctl autoscale set` changes the autoscale.*
// ones.

// clusterConfig is what cluster settings configure.
type clusterConfig struct {
	Placement placement.Config
	Autoscale elastic.Policy
	GC        queue.GCConfig
}

// Validate checks each part; the autoscale policy against the
// replication factor.
func (c clusterConfig) Validate() error {
	if err := c.GC.Validate(); err != nil {
		return err
	}
	if err := c.Placement.Validate(); err != nil {
		return err
	}
	if err := c.Autoscale.Validate(c.Placement.ReplicationFactor); err != nil {
		return fmt.Errorf("autoscale policy: %w", err)
	}
	return nil
}

// setting is one known key: how to apply a value to a configuration.
type setting struct {
	help  string
	apply func(c *clusterConfig, v string) error
}

// settings are every known key: placement's here, autoscale.* in
// autoscale.go.
var settings = map[string]setting{}

func init() {
	for k, v := range placementSettings {
		settings[k] = setting{v.help, func(c *clusterConfig, s string) error { return v.apply(&c.Placement, s) }}
	}
	for k, v := range autoscaleSettings {
		settings[k] = v
	}
	settings["gc-ttl"] = durationSetting(func(c *clusterConfig) *time.Duration { return &c.GC.TTL },
		"how long overwritten and deleted versions stay readable before GC removes them, 1s to 720h")
}

// placementSetting applies a value to the placement configuration.
type placementSetting struct {
	help  string
	apply func(c *placement.Config, v string) error
}

var placementSettings = map[string]placementSetting{
	"range-max-bytes": {"Θmax: the most a range holds; it splits above range-split-fill of this, and writes wait for the split near it (bytes; KiB/MiB/GiB suffixes)", func(c *placement.Config, v string) (err error) {
		c.RangeMaxBytes, err = units.ParseBytes(v)
		return err
	}},
	"range-split-fill": {"a range splits by size once above this share of range-max-bytes, in (0.5, 1], so one written fast splits before it is full",
		floatSetting(func(c *placement.Config) *float64 { return &c.SplitFill })},
	"range-min-bytes": {"Θmin: adjacent ranges together below this size merge (bytes)", func(c *placement.Config, v string) (err error) {
		c.RangeMinBytes, err = units.ParseBytes(v)
		return err
	}},
	"merge-cooldown": {"no merge of a range split more recently (duration)", func(c *placement.Config, v string) (err error) {
		c.MergeCooldown, err = time.ParseDuration(v)
		return err
	}},
	"learner-grace": {"a plain learner older than this on a range with all its voters is removed as left over (duration)", func(c *placement.Config, v string) (err error) {
		c.LearnerGrace, err = time.ParseDuration(v)
		return err
	}},
	"surplus-grace": {"a range keeps a voter beyond the replication factor this long after its newest voter appeared, so an operator's add-replica then remove-replica is not raced by the trim (duration)", func(c *placement.Config, v string) (err error) {
		c.SurplusGrace, err = time.ParseDuration(v)
		return err
	}},
	"split-qps": {"a range above this request rate splits by load (requests/s)", floatSetting(func(c *placement.Config) *float64 { return &c.SplitQPS })},
	"load-split-slack": {"when the best lease placement leaves a node above (1 + this) × the mean node load, the hottest range splits by load (≥ 0; 0: off)",
		floatSetting(func(c *placement.Config) *float64 { return &c.LoadSplitSlack })},
	"load-split-min-qps": {"...if it serves at least this request rate (requests/s)",
		floatSetting(func(c *placement.Config) *float64 { return &c.LoadSplitMinQPS })},
	"move-margin": {"a lease moves for load only if the busiest node's load drops by more than this share of the mean node load (≥ 0)",
		floatSetting(func(c *placement.Config) *float64 { return &c.MoveMargin })},
	"min-move-qps": {"...and by more than this many requests/s (a sample's noise)",
		floatSetting(func(c *placement.Config) *float64 { return &c.MinMoveQPS })},
	"range-cooldown": {"a range that completed an operator this recently is not moved for balance (duration)", func(c *placement.Config, v string) (err error) {
		c.RangeCooldown, err = time.ParseDuration(v)
		return err
	}},
	"node-cooldown": {"a node that gave or received a lease or replica this recently takes no part in load moves (duration)", func(c *placement.Config, v string) (err error) {
		c.NodeCooldown, err = time.ParseDuration(v)
		return err
	}},
	"hot-key-share": {"share of a range's requests on one key beyond which no load split is tried (0..1)",
		floatSetting(func(c *placement.Config) *float64 { return &c.HotKeyShare })},
	"adaptive-read-qps": {"a range reading more than this gets adaptive learner replicas (reads/s)",
		floatSetting(func(c *placement.Config) *float64 { return &c.AdaptiveReadQPS })},
	"max-adaptive-replicas": {"the most adaptive learners per range", func(c *placement.Config, v string) (err error) {
		c.MaxAdaptiveReplicas, err = strconv.Atoi(v)
		return err
	}},
	"balance-tolerance": {"replica counts stay within max(1, this × mean) of the mean (0..1)",
		floatSetting(func(c *placement.Config) *float64 { return &c.BalanceTolerance })},
	"lease-tolerance": {"lease counts stay within max(1, this × mean) of the mean (0..1)",
		floatSetting(func(c *placement.Config) *float64 { return &c.LeaseTolerance })},
	"bootstrap-share": {"share of the busiest nodes' replicas a new node takes in phase 1 (0..1)",
		floatSetting(func(c *placement.Config) *float64 { return &c.BootstrapShare })},
	"merges": {"merge small adjacent ranges (true) or not (false)", func(c *placement.Config, v string) (err error) {
		c.Merges, err = strconv.ParseBool(v)
		return err
	}},
	"rebalance": {"splits, adaptive replicas, bootstrap and balance on (true) or only repair and drain (false)", func(c *placement.Config, v string) (err error) {
		c.Rebalance, err = strconv.ParseBool(v)
		return err
	}},
}

func floatSetting(field func(*placement.Config) *float64) func(*placement.Config, string) error {
	return func(c *placement.Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err == nil {
			*field(c) = f
		}
		return err
	}
}

// withSettings applies settings to base; an unknown key or a bad value is
// an error, as is a result that does not validate.
func withSettings(base clusterConfig, sts []*tidekvpb.Setting) (clusterConfig, error) {
	c := base
	for _, st := range sts {
		def, ok := settings[st.GetKey()]
		if !ok {
			return base, fmt.Errorf("unknown setting %q (known: %s)", st.GetKey(), strings.Join(settingNames(), ", "))
		}
		if err := def.apply(&c, st.GetValue()); err != nil {
			return base, fmt.Errorf("setting %s: %v", st.GetKey(), err)
		}
	}
	return c, c.Validate()
}

func settingNames() []string {
	names := make([]string, 0, len(settings))
	for n := range settings {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// baseConfig is what the node was started with, before cluster settings.
func (s *Server) baseConfig() clusterConfig {
	return clusterConfig{Placement: s.cfg.Placement, Autoscale: s.cfg.Autoscale, GC: s.cfg.GC}
}

// clusterConfig is the node's configuration with the cluster settings
// stored in the meta range applied (meta leaseholder only).
func (s *Server) clusterConfig() clusterConfig {
	sts, err := raftstore.ReadMetaSettings(s.eng)
	if err != nil {
		return s.baseConfig()
	}
	c, err := withSettings(s.baseConfig(), sts)
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
	resp, err := callMeta(ctx, s, func(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.SettingsResponse, error) {
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
	current, err := raftstore.ReadMetaSettings(s.eng)
	if err != nil {
		return nil, err
	}
	if len(req.GetSet()) > 0 {
		merged := map[string]string{}
		for _, st := range current {
			merged[st.GetKey()] = st.GetValue()
		}
		for _, st := range req.GetSet() {
			if _, ok := settings[st.GetKey()]; !ok {
				return nil, invalidArg("unknown setting %q (known: %s)", st.GetKey(), strings.Join(settingNames(), ", "))
			}
			merged[st.GetKey()] = st.GetValue()
		}
		var all []*tidekvpb.Setting
		for k, v := range merged {
			if v != "" {
				all = append(all, &tidekvpb.Setting{Key: k, Value: v})
			}
		}
		if _, err := withSettings(s.baseConfig(), all); err != nil {
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
		s.pokeSizes() // Θmax may have changed: the write budgets here follow at once
		if current, err = raftstore.ReadMetaSettings(s.eng); err != nil {
			return nil, err
		}
	}
	return &tidekvpb.SettingsResponse{Settings: current}, nil
}
