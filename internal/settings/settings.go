package settings

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/queue"
	"github.com/tidekv/tidekv/internal/units"
)

// Cluster settings override placement's configuration, the autoscale
// policy and gc-ttl at runtime, for the whole cluster: they live in the
// meta range, and the controller reads them every round (gc-ttl reaches
// every node in its heartbeat's answer). `tidekv ctl config` lists
// and changes them; `tidekv ctl autoscale set` changes the autoscale.*
// ones.

// Config is what cluster settings configure.
type Config struct {
	Placement placement.Config
	Autoscale elastic.Policy
	GC        queue.GCConfig
}

// Validate checks each part; the autoscale policy against the
// replication factor.
func (c Config) Validate() error {
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
	apply func(c *Config, v string) error
}

// settings are every known key: placement's, autoscale.* and gc-ttl.
var settings = map[string]setting{}

func init() {
	for k, v := range placementSettings {
		settings[k] = setting{v.help, func(c *Config, s string) error { return v.apply(&c.Placement, s) }}
	}
	for k, v := range autoscaleSettings {
		settings[k] = v
	}
	settings["gc-ttl"] = durationSetting(func(c *Config) *time.Duration { return &c.GC.TTL },
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

// Apply applies settings to base; an unknown key or a bad value is an
// error, as is a result that does not validate.
func Apply(base Config, sts []*tidekvpb.Setting) (Config, error) {
	c := base
	for _, st := range sts {
		def, ok := settings[st.GetKey()]
		if !ok {
			return base, fmt.Errorf("unknown setting %q (known: %s)", st.GetKey(), strings.Join(Names(), ", "))
		}
		if err := def.apply(&c, st.GetValue()); err != nil {
			return base, fmt.Errorf("setting %s: %v", st.GetKey(), err)
		}
	}
	return c, c.Validate()
}

// Names lists the known keys, sorted.
func Names() []string {
	names := make([]string, 0, len(settings))
	for n := range settings {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var autoscaleSettings = map[string]setting{
	"autoscale.enabled": {"let the controller add and remove nodes (true) or only recommend and set the migration rate (false)",
		func(c *Config, v string) (err error) {
			c.Autoscale.Enabled, err = strconv.ParseBool(v)
			return err
		}},
	"autoscale.ignore-interference": {"plan as if every node had its peers' capacity: no interference factor, no lease balance by measured capacity (the plain planner, for comparison)",
		func(c *Config, v string) (err error) {
			c.Autoscale.IgnoreInterference, err = strconv.ParseBool(v)
			return err
		}},
	"autoscale.controller": {"static, reactive, proactive or combined", func(c *Config, v string) error {
		c.Autoscale.Controller = v
		return nil
	}},
	"autoscale.actuator": {"how nodes are added and removed: local, kubernetes or manual", func(c *Config, v string) error {
		c.Autoscale.Actuator = v
		return nil
	}},
	"autoscale.slo-p99":            durationSetting(func(c *Config) *time.Duration { return &c.Autoscale.SLOP99 }, "foreground p99 target"),
	"autoscale.horizon":            durationSetting(func(c *Config) *time.Duration { return &c.Autoscale.Horizon }, "how far past a new node's lead time the forecast is read"),
	"autoscale.season":             durationSetting(func(c *Config) *time.Duration { return &c.Autoscale.Season }, "the load's period for the forecaster (0: none)"),
	"autoscale.node-start-time":    durationSetting(func(c *Config) *time.Duration { return &c.Autoscale.NodeStartTime }, "how long a new node takes to start serving"),
	"autoscale.scale-in-after":     durationSetting(func(c *Config) *time.Duration { return &c.Autoscale.ScaleInAfter }, "how long the load must fit in one node fewer before one leaves"),
	"autoscale.cool-down":          durationSetting(func(c *Config) *time.Duration { return &c.Autoscale.CoolDown }, "least time after a scaling action before a scale-in"),
	"autoscale.target-utilization": floatClusterSetting(func(c *Config) *float64 { return &c.Autoscale.TargetUtilization }, "share of a node's capacity at the SLO the planner fills (0..1]"),
	"autoscale.node-capacity":      floatClusterSetting(func(c *Config) *float64 { return &c.Autoscale.NodeCapacity }, "a node's requests/s at full use, until learned"),
	"autoscale.min-nodes":          intSetting(func(c *Config) *int { return &c.Autoscale.MinNodes }, "never fewer nodes"),
	"autoscale.max-nodes":          intSetting(func(c *Config) *int { return &c.Autoscale.MaxNodes }, "never more nodes"),
	"autoscale.react-after":        intSetting(func(c *Config) *int { return &c.Autoscale.ReactAfter }, "rounds over the thresholds before the reactive rule adds nodes"),
	"autoscale.migration-min":      bytesSetting(func(c *Config) *float64 { return &c.Autoscale.Bandwidth.Min }, "migration rate floor per node (bytes/s)"),
	"autoscale.migration-max":      bytesSetting(func(c *Config) *float64 { return &c.Autoscale.Bandwidth.Max }, "migration rate ceiling per node when foreground is light (bytes/s)"),
	// Growing cache key spaces (elastic.OverflowConfig, docs/keyspaces.md).
	"autoscale.cache-min-threshold": floatClusterSetting(func(c *Config) *float64 { return &c.Autoscale.Overflow.MinThreshold },
		"growing cache key spaces: lowest pre-launch threshold T, as a share of the capacity per node"),
	"autoscale.cache-max-threshold": floatClusterSetting(func(c *Config) *float64 { return &c.Autoscale.Overflow.MaxThreshold },
		"growing cache key spaces: highest pre-launch threshold T, as a share of the capacity per node (equal to the lowest: T fixed)"),
	"autoscale.cache-shed-at": floatClusterSetting(func(c *Config) *float64 { return &c.Autoscale.Overflow.ShedAt },
		"growing cache key spaces: share of the capacity at which a node moves data away"),
	"autoscale.cache-max-move-share": floatClusterSetting(func(c *Config) *float64 { return &c.Autoscale.Overflow.MaxMoveShare },
		"growing cache key spaces: largest range, as a share of the capacity, that moves whole (a bigger one is split first)"),
	"autoscale.cache-rate-alpha": floatClusterSetting(func(c *Config) *float64 { return &c.Autoscale.Overflow.RateAlpha },
		"growing cache key spaces: smoothing of the fill rate per round (0..1]"),
	"autoscale.cache-rate-window": durationSetting(func(c *Config) *time.Duration { return &c.Autoscale.Overflow.RateWindow },
		"growing cache key spaces: how long the lowest and highest fill rates are remembered"),
	"autoscale.cache-min-rate": bytesSetting(func(c *Config) *float64 { return &c.Autoscale.Overflow.MinRate },
		"growing cache key spaces: floor of the lowest fill rate (bytes/s)"),
}

func durationSetting(field func(*Config) *time.Duration, help string) setting {
	return setting{help + " (duration)", func(c *Config, v string) (err error) {
		*field(c), err = time.ParseDuration(v)
		return err
	}}
}

func floatClusterSetting(field func(*Config) *float64, help string) setting {
	return setting{help, func(c *Config, v string) (err error) {
		*field(c), err = strconv.ParseFloat(v, 64)
		return err
	}}
}

func intSetting(field func(*Config) *int, help string) setting {
	return setting{help, func(c *Config, v string) (err error) {
		*field(c), err = strconv.Atoi(v)
		return err
	}}
}

func bytesSetting(field func(*Config) *float64, help string) setting {
	return setting{help + "; KiB/MiB/GiB suffixes", func(c *Config, v string) error {
		b, err := units.ParseBytes(v)
		*field(c) = float64(b)
		return err
	}}
}

// Known reports whether key is a setting.
func Known(key string) bool {
	_, ok := settings[key]
	return ok
}
