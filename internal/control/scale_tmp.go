package control

// TEMPORARY: the same declarations as the elastic branch's planner.go;
// removed when it merges.

import "time"

type ScaleKind int

const (
	ScaleNone ScaleKind = iota
	ScaleOut
	ScaleIn
)

type ScaleAction struct {
	Kind      ScaleKind
	From, To  int
	Reason    string
	Proactive bool
}

type ForecastPoint struct {
	At  time.Time `json:"at"`
	Ops float64   `json:"ops"`
}
