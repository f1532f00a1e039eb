// Package geo owns TideKV's geo transactions (docs/transactions.md, "Geo
// mode"): one-shot transactions over a geo key space whose data every data
// centre (DC, a locality) keeps a full copy of, replicated by an epoch log
// instead of Raft.
//
// Each DC's gateway collects the transactions it receives during an epoch
// and sends them to the other DCs as one epoch message. Once a DC holds
// every DC's message for an epoch it orders the epoch's transactions the
// same way every DC does (by DC id, then sequence) and executes them
// speculatively on its own copy, partition by partition as transaction
// chains. Each DC's later messages carry its results; a transaction is
// decided, and its client answered, when a majority of DCs report the same
// result, one inter-DC round trip after its epoch ended. A DC whose
// result differs rolls back to its validated state, adopts the majority's
// result and executes what followed again.
//
// What the package owns: the operations and their validation (op.go), the
// copy of the data (store.go), the chain executor (chain.go), the protocol
// of one DC, pure and driven by an injected clock (dc.go: epochs and
// messages; votes.go: which inputs an epoch runs with; exec.go: execution,
// validation and rollback; relay.go: sending again what peers lack), the
// transport interface with an in-memory twin (transport.go) and the
// runtime that drives a DC with a real clock (node.go). The server wires a
// node to gRPC (internal/georpc).
package geo
