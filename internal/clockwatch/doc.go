// Package clockwatch owns a node's watch over its clock (docs/design.md,
// "Clocks"): it folds the HLC of every closed-timestamp push and KV Batch
// message the node receives into the node's clock, refusing and counting
// one further ahead than the maximum offset; it estimates each peer's
// offset from the round trips of the exchanges the node starts, and takes
// negated the estimates of the peers that start them with it (a responder
// has no round trip of its own); and every push interval it judges
// whether the node's clock is certainly beyond 0.8 × the maximum offset
// from a majority of its peers, then tells the node (Node) to stop or
// resume holding leases and records the change as an event, a log line
// and its metrics. The control loop, seeing the verdict in the node's
// heartbeat, moves leases off the node (placement's clock policy).
//
// Time comes in as an argument; the node's clock, lease switch and event
// log are reached through Node and HLC, which the package owns. It imports
// api/hlc, api/tidekvpb and the Prometheus client. It imports no server,
// SDK or network code (internal/server, client, internal/transport, net,
// net/http) (internal/lint).
package clockwatch
