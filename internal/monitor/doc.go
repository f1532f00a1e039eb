// Package monitor measures how loaded this node is and condenses it into one
// number, the load score, that replica selection can compare across nodes
// (lower is better).
//
// It owns three things: sampling the machine's resource utilisation (CPU,
// memory, disk I/O from /proc on Linux, through the Source interface so
// tests can feed canned files), the pure Score function with its Weights,
// and the Monitor that samples periodically and publishes immutable
// Snapshots for lock-free reading on the request path. ServiceTimer is the
// helper the request path uses to report how long requests take.
//
// It does not ship scores to other nodes or pick replicas; those belong to
// the code that owns the wire and the routing. It imports only the standard
// library. The formula and tuning advice are in docs/monitor.md.
package monitor
