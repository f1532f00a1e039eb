// Package keyspaces owns a node's side of the key spaces
// (docs/keyspaces.md): its copy of the catalogue (read on every request
// that names a key space, refreshed from the meta range on a miss), the
// checks that a request's keys belong to the key space it names, the
// memory engines of memory key spaces inside the node's routed engine, the
// hits, misses and evictions counted by key space, the leaseholder's
// recency of keys in key spaces with a capacity and the eviction round
// that keeps a node's share under that capacity, and read-through from a
// key space's miss handler. It also reads the catalogue from the meta
// range's data (ReadCatalogue) and gives the control loop the key spaces'
// boundaries, capacities and replication factors (Spaces.Place).
//
// The node is reached through Node, which the package owns: its replicas,
// their sizes, the refresh of the catalogue from the meta leaseholder and
// the fetch from a miss handler's origin (the server holds the HTTP
// client). Its refusals are api/kverr's. It builds on internal/raftstore
// (replicas, the meta range's layout), internal/cache and internal/queue
// (eviction's and read-through's decisions and memory), internal/control
// (the observation it fills), internal/memengine, internal/storage,
// internal/metrics and internal/events. It imports no server, SDK or
// network code (internal/server, client, internal/transport, net,
// net/http) (internal/lint).
package keyspaces
