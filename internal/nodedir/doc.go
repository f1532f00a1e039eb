// Package nodedir is a node's directory of the cluster's nodes: each node's
// descriptor (addresses, locality) by ID, as the meta range's heartbeat
// answers last listed them, persisted in the node's engine so a restarted
// node reaches its peers before its first heartbeat.
//
// It imports the API types, internal/keys (where the copy is kept) and
// internal/storage (the engine it is kept in).
package nodedir
