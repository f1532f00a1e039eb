// Package events keeps a node's recent events: what the node did on its own
// or was asked to do (splits, replica moves, lease transfers, liveness
// changes), with the reason, in a bounded in-memory log.
//
// It owns only the log; recording sites live with the code that acts, and
// the node serves the log over the Admin API (gathering every node's for
// `tidekv ctl events` and the dashboard). It imports the standard library
// and the API types only.
package events
