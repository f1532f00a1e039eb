// Package kvapi is a node's typed, in-process KV API: Get, Put, Delete,
// Scan, BatchGet, Write, GuardedWrite and CompareAndSet on the node's own
// replicas, and a transaction's range-level steps (WriteIntents,
// CommitOnePhase, TxnRecord, ResolveIntents, Refresh: txn.go), taking
// Go values and returning the errors of api/kverr. It owns what every KV request goes through on its way to a replica:
// validation against the request limits, admission, routing to the
// replica (one range lookup per request, none when the caller found the
// replica already), the wait for room under the range's size limit, the
// wait past other transactions' intents, and the request's metrics.
//
// The node's gRPC KV service is a thin wrapper over it that converts at
// its edge (protobuf in, gRPC status out); the Redis gateway and the
// transaction service call it directly. What it needs of the node
// (admission, key spaces, metrics, the intent waits) it reaches through
// Node, which the node implements.
//
// It imports api/..., internal/admission, internal/keys and
// internal/raftstore; it imports no server, gateway, client or network
// code (internal/server, internal/redisgw, internal/resp, client,
// internal/transport, internal/gossip) (internal/lint).
package kvapi
