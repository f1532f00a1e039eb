// Package elastic runs an elasticity scenario against real tidekv server
// processes on this machine: a cluster started with the local actuator,
// an open-loop load following a curve (step, spike), and a per-second
// timeline of offered, served and refused requests, p99, serving nodes
// and the migration allowance, summarised with the same metrics as the
// simulator's runs (sim.Metrics) so the two can be compared.
package elastic
