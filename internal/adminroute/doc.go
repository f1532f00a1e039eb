// Package adminroute runs a node's admin operations where they run: on the
// meta range's leaseholder (Meta: the range directory, joins, heartbeats,
// reports, settings) or on a range's leaseholder (Range: splits, replica
// changes, lease transfers, merges), locally when this node holds the
// lease, otherwise on the node that does, found by following
// NOT_LEASEHOLDER hints from the nodes this one knows. A call forwarded to
// a node that turns out not to hold the lease is answered with the hint,
// not forwarded again. It also holds the node's gRPC connections to its
// peers (Conn), which the rest of the node uses for its own calls.
//
// The node is reached through Node, which the package owns: its local
// replicas, its own address and ID, the node directory, the range
// directory, and its error vocabulary at the wire (typed errors to gRPC
// statuses and the detail of a peer's answer). It builds on
// internal/raftstore (replicas, their typed routing errors) and
// internal/keys. It imports no server or SDK code (internal/server,
// client) (internal/lint).
package adminroute
