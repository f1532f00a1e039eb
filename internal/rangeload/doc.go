// Package rangeload owns a node's load table: each local range's recent
// request and read rates, size, hottest-key share and writes by origin,
// turned from the replicas' counters into rates once per report interval
// (Tracker), with the rule that says when a sample is fresh enough for
// placement to act on (CoversWindow, Tracker.Of). Load is also the shape
// in which the meta leaseholder keeps the ranges' reports (internal/meta).
//
// The caller reads the counters and sizes and passes them in with the time;
// the package does no I/O and reads no clock. It imports only the
// standard library: it imports no server, SDK or network code
// (internal/server, client, internal/transport, net, net/http)
// (internal/lint).
package rangeload
