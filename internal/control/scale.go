package control

import "time"

// ScaleKind says what a scaling action does.
type ScaleKind int

const (
	// ScaleNone changes nothing.
	ScaleNone ScaleKind = iota
	// ScaleOut adds nodes.
	ScaleOut
	// ScaleIn drains and removes one node.
	ScaleIn
)

// ScaleAction is a planner's decision about the number of nodes: from
// From serving nodes to To, with its reason; Proactive when a forecast,
// not an observed overload, called for it; Overlap when a scale-in is
// meant to begin while earlier drains go on (the plan does not count
// their nodes).
type ScaleAction struct {
	Kind      ScaleKind
	From, To  int
	Reason    string
	Proactive bool
	Overlap   bool
}

// ForecastPoint is the offered load (ops/s) a forecast expects at At.
type ForecastPoint struct {
	At  time.Time `json:"at"`
	Ops float64   `json:"ops"`
}
