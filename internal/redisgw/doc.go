// Package redisgw adapts TideKV's KV to the Redis front end (package resp):
// it owns what a Redis database is in TideKV and how its calls reach the
// store. InKeySpace maps a database's keys into its key space (SELECT n is
// key space number n: Databases) and gives its puts the key space's
// default TTL; FromClient sends calls through the routing client (package
// client), mapping TideKV's errors (api/kverr) to resp's sentinels. A
// node's own in-process path (internal/server's redisKV, which calls the
// node's typed KV API, internal/kvapi, for ranges it leads) sits under
// InKeySpace beside FromClient.
//
// Imports: the standard library, api/kverr, client, internal/keyspace and
// internal/resp. resp imports no SDK: the adaptation lives here.
package redisgw
