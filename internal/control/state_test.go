package control

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/placement"
)

// stateObs is three live nodes serving ops/s evenly at round i.
func stateObs(i int, ops float64) Observation {
	obs := Observation{Now: epoch.Add(time.Duration(i) * time.Second), Signals: map[uint64]NodeSignal{}}
	for id := uint64(1); id <= 3; id++ {
		obs.Nodes = append(obs.Nodes, placement.Node{ID: id, State: placement.NodeLive})
		obs.Signals[id] = NodeSignal{Addr: fmt.Sprintf("n%d:1", id), Ops: ops / 3, CPU: ops / 3 / 10000, P99: 3 * time.Millisecond}
	}
	return obs
}

func newStateAutoscaler(t *testing.T) (*Autoscaler, *fakeActuator) {
	t.Helper()
	p := elastic.DefaultPolicy()
	p.Enabled, p.MinNodes, p.NodeCapacity = true, 4, 10000 // the floor asks for a fourth node
	runner, _, ev, _ := newTestRunner(DefaultRunnerConfig())
	act := &fakeActuator{}
	return NewAutoscaler(p, time.Second, NewScaler(DefaultScalerConfig(), act, &fakeDecom{}, inline, ev), runner, ev), act
}

// An autoscaler restored, through the stored encoding, from another's
// state in the middle of a scale-out plans as the original does and
// follows the scale-out instead of asking for the node again; a fresh
// one asks again (what the persistence prevents).
func TestAutoscalerStateResumesScaleOut(t *testing.T) {
	a, actA := newStateAutoscaler(t)
	load := func(i int) float64 { return 6000 + 3000*float64(i%17)/17 }
	for i := range 40 {
		a.Round(stateObs(i, load(i)), 3, 0, 0)
	}
	if len(actA.outs) != 1 {
		t.Fatalf("the original asked for nodes %v times, want once (pending until they join)", actA.outs)
	}
	raw, err := EncodeState(a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	st, err := DecodeState(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, actB := newStateAutoscaler(t)
	if err := b.Restore(st); err != nil {
		t.Fatal(err)
	}
	fresh, actFresh := newStateAutoscaler(t)
	for i := 40; i < 60; i++ {
		for _, x := range []*Autoscaler{a, b, fresh} {
			x.Round(stateObs(i, load(i)), 3, 0, 0)
		}
		sa, sb := a.Status(), b.Status()
		if !reflect.DeepEqual(sa.Forecast, sb.Forecast) || sa.TargetNodes != sb.TargetNodes || sa.PendingOut != sb.PendingOut ||
			!reflect.DeepEqual(sa.CapacityOpsPerNode, sb.CapacityOpsPerNode) || sa.MigrationBytesPerSec != sb.MigrationBytesPerSec {
			t.Fatalf("round %d: restored status\n%+v\noriginal\n%+v", i, sb, sa)
		}
	}
	if len(actA.outs) != 1 || len(actB.outs) != 0 {
		t.Fatalf("scale-outs asked: original %v, restored %v; want the pending one only", actA.outs, actB.outs)
	}
	if len(actFresh.outs) != 1 || reflect.DeepEqual(a.Status().Forecast, fresh.Status().Forecast) {
		t.Fatalf("a fresh autoscaler asked %v and forecast as the original: the test shows nothing", actFresh.outs)
	}
	if h := b.Status().Decisions; len(h) == 0 || h[0].Action != "scale-out" {
		t.Fatalf("the restored history %+v lacks the scale-out", h)
	}
}

// The decoder refuses any version but its own, in one sentence, and
// leaves nothing half-decoded.
func TestDecodeStateRefusesUnknownVersion(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"version":2,"planner":{}}`, "at version 2, this binary reads version 1 only"},
		{`{"planner":{}}`, "at version 0, this binary reads version 1 only"},
		{`not json`, "not readable"},
	} {
		st, err := DecodeState([]byte(tc.raw))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !reflect.DeepEqual(st, State{}) {
			t.Fatalf("%s: %v (%+v), want %q", tc.raw, err, st, tc.want)
		}
	}
}

// The loop hands placement each node's capacity as the autoscaler's model
// measured it: node 2, delivering half as much per unit of CPU (a
// co-runner), weighs half; the plain planner (IgnoreInterference) hands
// none, so placement treats the nodes as equal.
func TestLoopFillsMeasuredCapacity(t *testing.T) {
	for _, plain := range []bool{false, true} {
		runner, _, ev, _ := newTestRunner(DefaultRunnerConfig())
		p := elastic.DefaultPolicy()
		p.NodeCapacity, p.IgnoreInterference = 10000, plain
		c := NewController(DefaultConfig(), placement.DefaultConfig())
		var seen []placement.Node
		c.SetDecider(func(s placement.Snapshot) placement.Plan { seen = s.Nodes; return placement.Plan{} })
		l := &Loop{Controller: c, Runner: runner, Sink: ev, Autoscaler: NewAutoscaler(p, time.Second, nil, runner, ev)}
		for i := range 20 {
			obs := stateObs(i, 9000)
			obs.Signals[2] = NodeSignal{Addr: "n2:1", Ops: 1500, CPU: 0.3, P99: 3 * time.Millisecond}
			l.Round(obs)
		}
		caps := map[uint64]float64{}
		for _, n := range seen {
			caps[n.ID] = n.Capacity
		}
		if plain {
			if caps[1] != 0 || caps[2] != 0 || caps[3] != 0 {
				t.Fatalf("plain planner: capacities %v, want none", caps)
			}
			continue
		}
		if caps[1] <= 0 || math.Abs(caps[2]/caps[1]-0.5) > 0.02 || caps[3] != caps[1] {
			t.Fatalf("capacities %v: want node 2 at half of nodes 1 and 3", caps)
		}
	}
}

// The cluster's p99 is the worst among nodes taking a noticeable share of
// the requests (elastic.Policy.Noticeable, the rule the capacity model
// learns by): a node answering a trickle, however slowly, is not the
// cluster's tail; one taking a third of an even split is.
func TestAutoscalerP99FromNoticeableNodes(t *testing.T) {
	runner, _, ev, _ := newTestRunner(DefaultRunnerConfig())
	a := NewAutoscaler(elastic.DefaultPolicy(), time.Second, nil, runner, ev)
	for _, c := range []struct {
		ops  float64
		want float64 // ms
	}{{20, 3}, {500, 100}} {
		obs := stateObs(0, 6000)
		obs.Signals[3] = NodeSignal{Addr: "n3:1", Ops: c.ops, CPU: 0.4, P99: 100 * time.Millisecond}
		a.Round(obs, 3, 0, 0)
		if got := a.Status().P99Ms; got != c.want {
			t.Errorf("node 3 at %v ops/s and 100 ms beside two at 2000 ops/s and 3 ms: cluster p99 %v ms, want %v", c.ops, got, c.want)
		}
	}
}
