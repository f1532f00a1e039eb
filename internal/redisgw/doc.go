// Package redisgw adapts TideKV's KV to the Redis front end (package resp):
// it owns what a Redis database is in TideKV and how its calls reach the
// store. InKeySpace maps a database's keys into its key space (SELECT n is
// key space number n: Databases) and gives its puts the key space's
// default TTL; Gateway serves the calls on ranges this node leads in
// process, through the node's typed KV API as the interface Local it owns
// describes, and hands the rest (and a local attempt answered ErrRoute) to
// the routing client; FromClient sends calls through that client (package
// client), mapping TideKV's errors (api/kverr) to resp's sentinels. Front
// is a node's whole Redis front end: the RESP listener over a Gateway, and
// the routing client, started together (Serve) and closed together.
//
// Imports: the standard library, the Prometheus client, api/kverr, api/tidekvpb, client,
// api/keyspace, internal/ksconfig and internal/resp. resp imports no SDK:
// the adaptation lives here. It imports no server or store code
// (internal/server, internal/raftstore) (internal/lint).
package redisgw
