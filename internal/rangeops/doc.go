// Package rangeops runs the admin operations that change one range, on
// its leaseholder (here or forwarded, internal/adminroute): splits (at a
// key, by size, by load, at an expected generation), replica changes
// (voters and learners), lease transfers (never to a node whose clock is
// not trusted), and merges with the right neighbour (freeze it, wait
// until every replica applied the freeze, merge, or unfreeze when the
// merge is refused), each recorded in the node's event log.
//
// The node is reached through Node, which the package owns: its ID and
// replicas, the node and range directories, range IDs from the meta range,
// key checks, the key spaces' replication factors, the clock verdicts, the
// split line and the event log. The gRPC admin service calls it, and the
// control loop's operators run through Execute, in process with Go values.
// It builds on internal/raftstore, internal/adminroute, internal/keys and
// internal/placement (the operators); its refusals are typed: bad input is
// api/kverr's, a split decided at a generation the range has left is
// ChangedError, a target that cannot take the operation RefusedError, and
// the gRPC status of each is made only at the node's edge. It imports no
// server or SDK code (internal/server, client) (internal/lint).
package rangeops
