// Package closedpush owns a node's side transport to its peers: one
// exchange per node pair every ClosedTimestampInterval, started by the node
// of the pair with the lower ID (Pusher.Round). Its request carries the
// closed timestamps of the ranges it leads that have a replica on the peer
// and its load; the answer carries the peer's, for the ranges the peer
// leads that have a replica on the initiator (the receiving service builds
// it; Heard). A peer whose previous exchange is still on its way is
// skipped that round. A peer heard pushing without exchange (a binary from
// before it) gets this node's pushes whatever its ID. It keeps the newest
// load heard from each node (Note, Loads), so followers can serve BOUNDED
// reads and every node (and clients, through NodeLoads) knows every node's
// load a fraction of a second old, at one request and one answer per node
// pair per interval.
//
// The node is reached through Node, which the package owns: its ID, the
// node directory, the injected partitions and WAN delays, the connections
// to peers, its closed timestamps and load, and the clock that stamps
// each message, samples the peer's offset from the answer and sends that
// estimate with the next exchange for the peer to take negated
// (internal/clockwatch). The receiving side is the node's admin service,
// which applies the closed timestamps, calls Heard and answers. It imports no
// server or SDK code (internal/server, client) (internal/lint).
package closedpush
