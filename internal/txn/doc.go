// Package txn is the transaction coordinator (docs/transactions.md step 5):
// it keeps a client's open transactions on the node the client sends them
// to, reads at their read timestamp, keeps their writes until the commit,
// commits them in one phase or two, heartbeats their records, rolls them
// back, runs one-shot transactions (If) and clears the way past other
// transactions' intents (pushes and the bounded wait, intents.go).
//
// It owns no I/O of its own: everything it sends to ranges goes through a
// Sender, an interface it owns, which the node satisfies with its routing
// (internal/txnclient adapts the SDK's client), and what it needs of the
// node it runs on comes as a Store and a Node. The gRPC Txn service in
// internal/server is a thin wrapper around it.
//
// It imports no SDK or server code (client, internal/server,
// internal/txnclient, internal/redisgw) (internal/lint): it sends only
// through a Sender.
package txn
