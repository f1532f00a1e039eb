// Package meta owns what the meta range's leaseholder keeps in memory
// besides the replicated directory (Table): who leads each range and the
// load its leaseholder last reported, when each node last heartbeated and
// with what, the node states it last announced; and how a node's state is
// named from that and from gossip (Table.Statuses, the State* names); and
// the control loop's observation assembled from the directory, the node
// statuses and the heartbeats (Table.Observe, PlacementState). A new
// leaseholder rebuilds the table from reports and heartbeats within a few
// seconds.
//
// Time comes in as an argument and gossip's view through GossipView; the
// package does no I/O. It imports api/tidekvpb, internal/keys,
// internal/gossip (its state names), internal/rangeload, and
// internal/control and internal/placement (the observation's types). It imports no
// server, SDK or network code (internal/server, client, internal/transport,
// net, net/http) (internal/lint).
package meta
