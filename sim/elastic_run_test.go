package sim

import (
	"strings"
	"testing"

	"github.com/tidekv/tidekv/internal/elastic"
)

func runElastic(t *testing.T, scenario, controller string) ElasticResult {
	t.Helper()
	c, err := ElasticScenario(scenario, controller, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := RunElastic(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %s (%d nodes at start): %s", scenario, controller, c.Nodes, r.Metrics)
	return r
}

// Under a daily wave the forecast sees the rise coming: the proactive and
// combined controllers add nodes before it and have well under the
// reactive controller's SLO violations, with fewer node-seconds than a
// cluster provisioned for the peak.
func TestElasticDiurnalProactiveBeatsReactive(t *testing.T) {
	static := runElastic(t, "diurnal", elastic.Static)
	reactive := runElastic(t, "diurnal", elastic.Reactive)
	for _, ctl := range []string{elastic.Proactive, elastic.Combined} {
		r := runElastic(t, "diurnal", ctl)
		if r.UnderReplicated != 0 {
			t.Errorf("%s: %d ranges under-replicated at the end", ctl, r.UnderReplicated)
		}
		if r.Metrics.ViolationSeconds > 0.6*reactive.Metrics.ViolationSeconds {
			t.Errorf("%s: %v violation seconds, reactive %v", ctl, r.Metrics.ViolationSeconds, reactive.Metrics.ViolationSeconds)
		}
		if r.Metrics.NodeSeconds >= static.Metrics.NodeSeconds {
			t.Errorf("%s: %v node-seconds, static at peak %v", ctl, r.Metrics.NodeSeconds, static.Metrics.NodeSeconds)
		}
	}
	if static.Metrics.ViolationSeconds != 0 || static.Metrics.ScalingActions != 0 {
		t.Errorf("static at peak: %s", static.Metrics)
	}
}

// Issue 34 item 4 on the daily wave and the replayed trace, seeds 1–3:
// the combined controller has at most half the reactive controller's
// violation seconds and buys them with no more node-seconds. On the
// trace this holds since the forecaster chooses its smoothing by its
// error at the horizon (combined 7,077 / 7,834 / 6,714 node-seconds
// against reactive's 7,177 / 7,953 / 6,744; before, 7,260 / 7,752 /
// 6,906: docs/benchmarks/elasticity.md).
func TestElasticCombinedBeatsReactiveAtNoMoreNodes(t *testing.T) {
	for _, scenario := range []string{"diurnal", "trace:traces/elastic_trace.csv"} {
		for seed := uint64(1); seed <= 3; seed++ {
			var m [2]ElasticMetrics
			for i, ctl := range []string{elastic.Reactive, elastic.Combined} {
				c, err := ElasticScenario(scenario, ctl, seed)
				if err != nil {
					t.Fatal(err)
				}
				r, err := RunElastic(c)
				if err != nil {
					t.Fatal(err)
				}
				m[i] = r.Metrics
			}
			reactive, combined := m[0], m[1]
			t.Logf("%s seed %d: reactive %s; combined %s", scenario, seed, reactive, combined)
			if combined.ViolationSeconds > 0.5*reactive.ViolationSeconds || combined.NodeSeconds > reactive.NodeSeconds {
				t.Errorf("%s seed %d: combined %v violation s / %v node-s against reactive %v / %v: want ≤ 0.5× and ≤",
					scenario, seed, combined.ViolationSeconds, combined.NodeSeconds, reactive.ViolationSeconds, reactive.NodeSeconds)
			}
		}
	}
}

// A doubled load: the cluster grows from 3 nodes, new nodes take data at
// the urgent rate while requests are refused, p99 is back under the SLO
// within a minute, and no range is left under-replicated.
func TestElasticStepGrowsAndRecovers(t *testing.T) {
	r := runElastic(t, "step", elastic.Combined)
	most, least := 0, 1<<30
	for _, p := range r.Timeline {
		most, least = max(most, p.Nodes), min(least, p.Nodes)
	}
	if most < 5 || least < 3 {
		t.Fatalf("nodes between %d and %d, want growth to ≥ 5 and never below 3", least, most)
	}
	if r.UnderReplicated != 0 {
		t.Fatalf("%d ranges under-replicated at the end", r.UnderReplicated)
	}
	if r.Metrics.ViolationSeconds > 60 {
		t.Fatalf("%v violation seconds after the step, want ≤ 60", r.Metrics.ViolationSeconds)
	}
	var sawUrgent, sawOut bool
	for _, l := range r.Log {
		sawUrgent = sawUrgent || strings.Contains(l.Text, "refuses requests while new nodes take data")
		sawOut = sawOut || strings.Contains(l.Text, "reactive:") || strings.Contains(l.Text, "proactive:")
	}
	if !sawUrgent || !sawOut {
		t.Fatalf("log lacks the scale-out reason (%v) or the urgent migration (%v)", sawOut, sawUrgent)
	}
}

func TestElasticScenarioRefusesBadInput(t *testing.T) {
	if _, err := ElasticScenario("tsunami", elastic.Combined, 1); err == nil || !strings.Contains(err.Error(), "unknown elastic scenario") {
		t.Fatalf("unknown scenario: %v", err)
	}
	if _, err := ElasticScenario("step", "psychic", 1); err == nil || !strings.Contains(err.Error(), `unknown controller "psychic"`) {
		t.Fatalf("unknown controller: %v", err)
	}
}
