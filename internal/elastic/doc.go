// Package elastic decides how many nodes the cluster needs and how fast
// data may move between them. It owns five small models, each fed one
// sample per control round and each a pure function of what it was fed:
//
//   - Forecaster: Holt-Winters (level, trend, optional season) over the
//     offered load, with its own online error at the planning horizon.
//   - CapacityModel: per node, the throughput it sustains at the latency
//     SLO, learned from (throughput, utilisation, p99) samples, and an
//     interference factor for nodes that deliver less than their peers.
//   - Bandwidth: an additive-increase, multiplicative-decrease controller
//     that sets the migration (snapshot) rate from foreground p99 against
//     the SLO, with a floor so moves always progress.
//   - Planner: the node count for the forecast load at the time a new
//     node would be ready (as long as the last scale-outs' nodes took to
//     serve; before any, start time plus data to move at the allowed
//     bandwidth), corrected by a reactive rule when p99 or utilisation
//     stay beyond thresholds, and scale-in only after a stable period
//     (with a trusted forecast, as soon as the forecast allows, beside
//     the drains under way).
//   - Overflow: for cache key spaces that grow rather than evict when
//     full, one more node as soon as the fullest node's share crosses the
//     seed paper's speculative threshold T = c/2 + δH·(‖N‖ − R/δL)
//     (Threshold, with its terms measured from the key space's fill
//     rate), and, for a node near its capacity, a split of its fullest
//     range at the median or a move of it to the node with most room.
//     The planner adds the node to its target and keeps a floor under
//     scale-in; docs/keyspaces.md maps each term to what is measured.
//
// Planner.Snapshot and Restore give the planner's learnt state as plain
// values (PlannerState), which internal/control stores and the next meta
// leaseholder resumes from.
//
// Policy is the one home of every knob, read by the server (stored in the
// meta range as autoscale.* settings) and the simulator alike. Nothing
// here reads the clock, sleeps or does I/O; internal/control wires these
// models into the control loop and carries out what they decide.
//
// It imports no I/O package (net, os, os/exec, net/http) (internal/lint).
package elastic
