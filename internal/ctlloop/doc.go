// Package ctlloop owns the node's run of the control loop
// (internal/control) on the meta range's leaseholder: a round every
// Control.Interval and a placement-only round when woken (Loop.Round,
// Loop.Urgent), the elasticity controller's policy and actuator
// (Config.Autoscale with the autoscale.* cluster settings applied), and
// the controller's state kept in the meta range so that it survives a
// move of the meta lease (resumed before the first round after the lease
// is acquired, stored every Control.StateEvery and in the round a scale
// operation starts or ends).
//
// It decides and does no I/O, sleeps not and reads no clock: the node is
// reached through Node, which the package owns (the meta replica and
// directory, the observation, the cluster settings, reading and storing
// the state, building an actuator, decommissioning, exporting the
// overflow view and the event log), time through Deps.Now, operators run
// through Deps.Exec and blocking actuator calls through Deps.Spawn. It
// imports no server, SDK or network code (internal/server, client,
// internal/transport, net, net/http) (internal/lint).
package ctlloop
