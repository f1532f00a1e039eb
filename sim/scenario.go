package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// EventKind says what an Event does.
type EventKind int

const (
	// AddNode adds a node (Spec); it joins in bootstrap phase 1.
	AddNode EventKind = iota
	// KillNode stops Node: suspect, dead after Options.DeadAfter.
	KillNode
	// RestartNode brings Node back.
	RestartNode
	// Decommission drains Node.
	Decommission
	// SetWorkload switches to Workload.
	SetWorkload
	// GrowData adds Bytes to Range (0: spread like writes).
	GrowData
)

// Event is something a scenario does at a time.
type Event struct {
	At       time.Duration
	Kind     EventKind
	Node     uint64
	Spec     NodeSpec
	Workload Workload
	Bytes    uint64
	Range    uint64
}

// Scenario is a simulation described as a Go value.
type Scenario struct {
	Name     string
	Cluster  ClusterSpec
	Workload Workload
	Options  Options
	// Config overrides the policy's configuration (see ApplyOverrides);
	// Policy builds it (nil: Placement, the real policies).
	Config map[string]string
	Policy PolicyFactory
	Events []Event
	// Duration is the total virtual time simulated.
	Duration time.Duration
}

// Result is what Run returns.
type Result struct {
	Scenario string
	// Steps: the cluster after each decision; Final: at the end.
	Steps []Step
	Final Step
	Log   []LogEntry
	Ops   []OpRecord
}

// Run simulates a scenario to its end.
func Run(sc Scenario) (Result, error) {
	factory := sc.Policy
	if factory == nil {
		factory = Placement
	}
	cfg := map[string]string{}
	if sc.Cluster.RF > 0 {
		cfg["rf"] = fmt.Sprint(sc.Cluster.RF)
	}
	for k, v := range sc.Config {
		cfg[k] = v
	}
	p, err := factory(cfg)
	if err != nil {
		return Result{}, err
	}
	w := sc.Workload
	if w.Keys == 0 {
		w = DefaultWorkload()
	}
	s, err := New(sc.Cluster, w, p, sc.Options)
	if err != nil {
		return Result{}, err
	}
	events := slices.Clone(sc.Events)
	slices.SortStableFunc(events, func(a, b Event) int { return int(a.At - b.At) })
	for _, ev := range events {
		if ev.At > sc.Duration {
			break
		}
		s.RunFor(ev.At - s.Now())
		if err := s.Apply(ev); err != nil {
			return Result{}, fmt.Errorf("sim: event at %s: %w", ev.At, err)
		}
	}
	s.RunFor(sc.Duration - s.Now())
	return Result{Scenario: sc.Name, Steps: s.Steps(), Final: s.Stat(), Log: s.Log(), Ops: s.Ops()}, nil
}

// Apply performs an event now.
func (s *Sim) Apply(ev Event) error {
	switch ev.Kind {
	case AddNode:
		s.AddNode(ev.Spec)
		return nil
	case KillNode:
		return s.KillNode(ev.Node)
	case RestartNode:
		return s.RestartNode(ev.Node)
	case Decommission:
		return s.Decommission(ev.Node)
	case SetWorkload:
		return s.SetWorkload(ev.Workload)
	case GrowData:
		return s.GrowData(ev.Bytes, ev.Range)
	}
	return fmt.Errorf("unknown event kind %d", ev.Kind)
}

// Timeline prints the result: one line per interval of every, then the
// log and the final summary.
func (r Result) Timeline(every time.Duration) string {
	var b strings.Builder
	if r.Scenario != "" {
		fmt.Fprintf(&b, "scenario %s\n", r.Scenario)
	}
	b.WriteString(FormatTimeline(r.Steps, 0, every, Counters{}))
	b.WriteString("log:\n")
	b.WriteString(FormatLog(r.Log, 0))
	b.WriteString(FormatSummary(r.Final, r.Final.Total))
	return b.String()
}
