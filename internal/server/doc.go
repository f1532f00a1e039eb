// Package server wires one TideKV node: the storage engine, the replica
// store, the Raft transport, the gRPC KV and admin services, the HTTP
// endpoint (/health, /ready, /metrics), and the node's background loops
// (internal/loops runs them; heartbeats and range reports are
// internal/nodereport's, the control loop runs on the meta leaseholder,
// replica garbage collection here).
//
// It imports every internal package it wires; nothing imports it but cmd/
// and tests.
package server
