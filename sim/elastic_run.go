package sim

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/elastic"
)

// ElasticConfig is one elasticity run: a load curve against a cluster run
// by one controller.
type ElasticConfig struct {
	Scenario   string // step, spike, diurnal, trace:FILE
	Controller string // elastic.Static, Reactive, Proactive or Combined
	Curve      LoadCurve
	Duration   time.Duration
	// Nodes start the cluster (static-at-peak starts with what the peak
	// needs); Node is every node's hardware, new ones included; Hog is the
	// share of node 1's capacity a co-runner steals.
	Nodes int
	Node  NodeSpec
	Hog   float64
	// StartDelay is how long a started node takes to join.
	StartDelay time.Duration
	Policy     elastic.Policy
	Seed       uint64
}

// ElasticResult is a run's summary and timeline.
type ElasticResult struct {
	Config   ElasticConfig
	Metrics  ElasticMetrics
	Timeline []ElasticPoint
	Log      []LogEntry
	// UnderReplicated counts ranges below RF voters at the end.
	UnderReplicated int
}

// Elastic scenario parameters (see docs/benchmarks/elasticity.md): 48
// ranges of 64 MiB at RF 3, 90% reads, and migration that costs 0.2% of a
// node's capacity per MiB/s. The planner's prior is a node of 10k
// requests/s; the model's nodes are not that: 9k on average, each drawn
// within ±10% and drifting by up to ±10% more, read with 5% noise.
const (
	elasticRanges     = 48
	elasticRangeBytes = 64 << 20
	elasticMigCost    = 0.002
	elasticPrior      = 10000
)

// elasticNode is the hardware of every node of an elastic scenario.
func elasticNode() NodeSpec {
	return NodeSpec{Capacity: 9000, Spread: 0.1, Drift: 0.1, Noise: 0.05, DiskBandwidth: 512 << 20, MigrationCost: elasticMigCost}
}

// ElasticScenario builds a named scenario for a controller. trace:FILE
// replays a "seconds,ops" file.
func ElasticScenario(name, controller string, seed uint64) (ElasticConfig, error) {
	p := elastic.DefaultPolicy()
	p.Enabled, p.Controller, p.Actuator = true, controller, "manual"
	p.NodeCapacity, p.MaxNodes = elasticPrior, 12
	p.ScaleInAfter, p.CoolDown = 90*time.Second, 60*time.Second
	c := ElasticConfig{Scenario: name, Controller: controller, Nodes: 3, Seed: seed, StartDelay: 10 * time.Second, Node: elasticNode()}
	switch {
	case name == "step":
		c.Curve, c.Duration = StepCurve(15000, 3*time.Minute, 2), 10*time.Minute
	case name == "spike":
		c.Curve, c.Duration = SpikeCurve(8000, 3*time.Minute, 4.5, 2*time.Minute), 10*time.Minute
	case name == "diurnal":
		period := 10 * time.Minute
		c.Curve, c.Duration = DiurnalCurve(22000, 16000, period, 0.05, seed), 4*period
		p.Season = period
	case strings.HasPrefix(name, "trace:"):
		text, err := os.ReadFile(strings.TrimPrefix(name, "trace:"))
		if err != nil {
			return c, err
		}
		pts, err := ParseTrace(strings.NewReader(string(text)))
		if err != nil {
			return c, err
		}
		c.Curve, c.Duration = TraceCurve(pts), pts[len(pts)-1].At
		p.Season = tracePeriod(string(text))
	default:
		return c, fmt.Errorf("sim: unknown elastic scenario %q (want step, spike, diurnal or trace:FILE)", name)
	}
	c.Policy = p
	if controller == elastic.Static {
		c.Nodes = max(c.Nodes, peakNodes(c))
	}
	return c, p.Validate(3)
}

// tracePeriod reads a trace's season from a "# period: SECONDS" comment
// line; without one the forecaster runs without a season.
func tracePeriod(text string) time.Duration {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# period:"); ok {
			if sec, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && sec > 0 {
				return time.Duration(sec * float64(time.Second))
			}
		}
	}
	return 0
}

// peakNodes is what static-at-peak provisions: the node count whose
// capacity at the SLO, filled to the target utilisation, carries the
// curve's peak (sampled every second) with its follower write cost, by
// the planner's own reckoning from its priors (an operator sizes by the
// figures it has, not by the model's true capacities).
func peakNodes(c ElasticConfig) int {
	peak := 0.0
	for t := time.Duration(0); t <= c.Duration; t += time.Second {
		peak = math.Max(peak, c.Curve(t))
	}
	prior := elastic.NewCapacityModel(c.Policy.NodeCapacity, c.Policy.IdleP99)
	perNode := prior.AtSLO(0, c.Policy.SLOP99, false) * c.Policy.TargetUtilization
	w := elasticWorkload()
	load := peak * (1 + (1-w.ReadShare)*DefaultOptions().FollowerWriteCost*2)
	return int(math.Ceil(load / perNode))
}

func elasticWorkload() Workload {
	w := DefaultWorkload()
	w.ReadShare = 0.9
	return w
}

// RunElastic runs one elasticity scenario in virtual time.
func RunElastic(c ElasticConfig) (ElasticResult, error) {
	pol, err := Placement(map[string]string{"rf": "3"})
	if err != nil {
		return ElasticResult{}, err
	}
	spec := ClusterSpec{Nodes: c.Nodes, Node: c.Node, Ranges: elasticRanges, RF: 3, BytesPerRange: elasticRangeBytes}
	s, err := New(spec, elasticWorkload(), pol, Options{Seed: c.Seed})
	if err != nil {
		return ElasticResult{}, err
	}
	if c.Hog > 0 {
		s.nodes[0].spec.Steal = c.Hog
	}
	if err := s.EnableAutoscaler(c.Policy, c.Node, c.StartDelay); err != nil {
		return ElasticResult{}, err
	}
	s.SetLoadCurve(c.Curve)
	s.RunFor(c.Duration)
	pts := s.ElasticTimeline()
	under, _, _ := s.health(3)
	return ElasticResult{Config: c, Metrics: Metrics(pts, c.Policy.SLOP99, s.opts.Tick, s.ScalingActions()),
		Timeline: pts, Log: s.Log(), UnderReplicated: under}, nil
}
