// Package sim is a deterministic simulator for TideKV's placement policies.
//
// It owns a model of a cluster in virtual time (nodes, ranges, replicas,
// leases, a workload over a key space, data growth), an operator runner
// with the limits of the server's (operators in flight, snapshots per
// node, operators per minute, migration bandwidth), events (nodes joining, dying, coming back,
// being decommissioned; workload changes) and metrics (imbalance indices,
// operation counts, under-replicated ranges, thrashing, operators the
// runner refused as invalid: policy bugs).
//
// Each decision interval it builds a placement.Snapshot from the model,
// calls the policy (placement.Decide behind the Policy seam) and runs the
// operators it returns, which take virtual time and change the model when
// they complete. Nothing reads the wall clock: time is a Clock the
// simulator advances, and the only randomness is a math/rand/v2 PCG source
// seeded by the scenario, so a scenario's output is a function of its seed.
//
// A cache key space (CacheSpec, cache.go) adds a capacity per node: a
// node over it evicts back to it, and the time nodes sit full is counted
// (CacheMetrics); PrelaunchScenario runs the overflow policy's scale-out
// with and without pre-launch.
//
// Scenarios are written as datadriven files (testdata/*.txt, see
// Interpreter for the commands) or as Go values (Scenario, Run).
// docs/simulator.md describes the model and what it simplifies.
//
// It runs the server's control code, never a copy: internal/placement,
// internal/control and internal/elastic decide, and internal/rangeload
// turns the model's request counts into the load reports they see
// (report.go). Its tests also import github.com/cockroachdb/datadriven.
package sim
