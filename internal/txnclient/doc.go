// Package txnclient adapts the SDK's routing client (client.Client) to
// txn.Sender: the transaction coordinator's reads and steps go through it
// to the ranges wherever they are led, and the SDK's errors come back
// marked with the coordinator's kinds (txn.ErrRetry, txn.ErrCommitted,
// txn.ErrNotOneRange, *txn.UncertainReadError), their text and status
// kept for the node's edge to answer by.
//
// It imports the SDK and internal/txn; nothing imports it but the node's
// wiring (internal/server).
package txnclient
