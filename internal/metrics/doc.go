// Package metrics owns a node's Prometheus set: the series it exports, on
// a registry of its own so that several in-process nodes (tests) never
// collide; the per-operation children resolved once instead of per
// request; the one-per-second ring of request rate and p99 the HTTP port
// serves; and the gauges read at scrape time from the node (Node), which
// the request path never pays for.
//
// Time comes in as an argument or as the start of a measured call; the
// package reads the node's state only through Node, which it owns.
//
// It imports the Prometheus client, api/keyspace, api/tidekvpb (the
// imbalance message), internal/httpapi (the series point type),
// internal/monitor and internal/raftstore (types of what the gauges read).
// It imports no server, SDK or network code (internal/server, client,
// internal/transport, net, net/http) (internal/lint).
package metrics
