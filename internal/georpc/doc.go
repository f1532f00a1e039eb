// Package georpc runs the geo mode (internal/geo, docs/transactions.md
// "Geo mode") on a node: its configuration (Config), the choice of each
// data centre's gateway (its locality's node with the lowest id), the
// gateway's geo.Node over the copy it keeps in memory, the sending of its
// epoch messages to the other gateways (with the same emulated WAN delays
// as Raft traffic), and the Geo gRPC service that answers Commit once a
// transaction is decided.
//
// What it needs of the node (the directory, readiness, the injected
// partition and delays, a connection to a peer, the persisted mark that
// this node ran a data centre) it reaches through Node, which it owns. It
// imports internal/geo, api/tidekvpb and gRPC. It imports no server, store
// or transport code (internal/server, internal/raftstore,
// internal/transport) (internal/lint).
package georpc
