package control

import "time"

// AutoscaleStatus is the elasticity controller's state as operators and
// scripts see it (`tidekv ctl autoscale status --json`, the dashboard).
// Field names are the script interface: change them only compatibly.
type AutoscaleStatus struct {
	Enabled  bool         `json:"enabled"`
	Actuator string       `json:"actuator"`
	Policy   StatusPolicy `json:"policy"`
	// Nodes serve now; TargetNodes is what the planner wants.
	Nodes       int `json:"nodes"`
	TargetNodes int `json:"target_nodes"`
	// PendingOut nodes were asked for and have not joined; PendingIn are
	// being drained.
	PendingOut int `json:"pending_out"`
	PendingIn  int `json:"pending_in"`
	// OfferedOps is the cluster's offered load (served + refused), P99Ms
	// its foreground p99.
	OfferedOps float64 `json:"offered_ops"`
	P99Ms      float64 `json:"p99_ms"`
	// CapacityOpsPerNode is each serving node's estimated throughput at
	// the SLO (ops/s), Interference its factor in (0,1] (1: none), by
	// node ID.
	CapacityOpsPerNode map[uint64]float64 `json:"capacity_ops_per_node"`
	Interference       map[uint64]float64 `json:"interference"`
	Forecast           []ForecastPoint    `json:"forecast"`
	ForecastError      float64            `json:"forecast_error"`
	// MigrationBytesPerSec is the snapshot bandwidth each node may use now,
	// MigrationReason why.
	MigrationBytesPerSec float64          `json:"migration_bytes_per_sec"`
	MigrationReason      string           `json:"migration_reason"`
	Decisions            []StatusDecision `json:"decisions"`
	// Timeline is the recent rounds, oldest first (the dashboard's view).
	Timeline []StatusPoint `json:"timeline"`
	// Caches are the key spaces that grow when full, as last measured.
	Caches []StatusCache `json:"caches"`
}

// StatusCache is a grow-when-full key space: its pre-launch threshold
// and its fullest node, in bytes of the key space per node.
type StatusCache struct {
	Name            string  `json:"name"`
	CapacityPerNode float64 `json:"capacity_per_node"`
	ThresholdBytes  float64 `json:"threshold_bytes"`
	FullestNode     uint64  `json:"fullest_node"`
	FullestBytes    float64 `json:"fullest_bytes"`
}

// StatusPoint is one round of the elasticity controller.
type StatusPoint struct {
	At                   time.Time `json:"at"`
	Nodes                int       `json:"nodes"`
	TargetNodes          int       `json:"target_nodes"`
	OfferedOps           float64   `json:"offered_ops"`
	P99Ms                float64   `json:"p99_ms"`
	MigrationBytesPerSec float64   `json:"migration_bytes_per_sec"`
}

// StatusPolicy is the part of the policy status shows.
type StatusPolicy struct {
	Controller        string  `json:"controller"`
	SLOP99Ms          float64 `json:"slo_p99_ms"`
	MinNodes          int     `json:"min_nodes"`
	MaxNodes          int     `json:"max_nodes"`
	TargetUtilization float64 `json:"target_utilization"`
}

// StatusDecision is one scaling decision or outcome.
type StatusDecision struct {
	At          time.Time `json:"at"`
	Action      string    `json:"action"`
	NodesBefore int       `json:"nodes_before"`
	NodesAfter  int       `json:"nodes_after"`
	Reason      string    `json:"reason"`
}
