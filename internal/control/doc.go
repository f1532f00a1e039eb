// Package control is TideKV's one home for control logic: the placement
// controller, the elasticity controller, and the runner that turns their
// decisions into side effects.
//
// A round is: an Observation of the cluster (ranges, nodes, load and
// latency signals, built by the server from the meta range or by the
// simulator from its model) goes into the Controller, which keeps the soft
// state that policies need across rounds (bootstrap phases, first
// sightings, smoothed hit rates, replica read peaks) and returns Decisions: placement
// operators, events with reasons. The Runner executes the operators within
// its limits (operators in flight, per-node snapshots, starts per minute)
// through an Executor, and remembers what it ran so the next round sees
// operators in flight and recent moves. Loop ties the three together; the
// server and the simulator both drive the same Loop, the server against
// admin calls and the simulator against its model.
//
// State is the elasticity controller's state across rounds (the planner's
// models, the scale operation under way) with its one versioned encoding;
// the server stores it in the meta range so the next leaseholder resumes.
//
// Nothing here sleeps, reads the wall clock or does I/O: time comes from
// the Observation and from an injected Clock, side effects go through the
// Executor, EventSink and Actuator interfaces, which the consumer of this
// package implements.
//
// It imports no I/O package (net, os, os/exec, net/http) (internal/lint).
package control
