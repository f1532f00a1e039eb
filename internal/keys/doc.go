// Package keys owns the layout of TideKV's keys inside a node's storage
// engine: where user data (unversioned, or versioned by internal/mvcc),
// meta-range data and each replica's Raft state live, and the helpers that map between user keys and engine keys.
//
// It imports only the standard library.
package keys
