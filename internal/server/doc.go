// Package server wires one TideKV node: the storage engine, the replica
// store, the Raft transport, the gRPC KV and admin services, the HTTP
// endpoint (/health, /ready, /metrics), and the node's background loops
// (heartbeats to the meta range, range reports, up-replication on the meta
// leaseholder, replica garbage collection).
//
// It imports every internal package it wires; nothing imports it but cmd/
// and tests.
package server
