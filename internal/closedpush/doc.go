// Package closedpush owns a node's side transport to its peers: every
// ClosedTimestampInterval it sends every other node one message, the
// closed timestamps of the ranges it leads that have a replica there and
// its own load, and takes the peer's load from the answer (Pusher.Round);
// a peer whose previous message is still on its way is skipped that
// round. It keeps the newest load heard from each node (Note, Loads), so
// followers can serve BOUNDED reads and every node (and clients, through
// NodeLoads) knows every node's load a fraction of a second old, at one
// small message per node pair per interval.
//
// The node is reached through Node, which the package owns: its ID, the
// node directory, the injected partitions and WAN delays, the connections
// to peers, its closed timestamps and load, and the clock that stamps
// each message and samples the peer's offset from the answer
// (internal/clockwatch). The receiving side is the node's admin service,
// which applies the closed timestamps and calls Note. It imports no
// server or SDK code (internal/server, client) (internal/lint).
package closedpush
