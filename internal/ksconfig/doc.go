// Package ksconfig owns TideKV's named key spaces as a cluster configures
// them: their settings (mode, replication factor, engine, capacity, default
// TTL, GC TTL) with defaults and validation, the catalogue of the key
// spaces a cluster has and the range boundaries it implies, and the admin
// API's message for them. Where a key space's keys live, and how a request
// names its key space, are api/keyspace's: the Go client needs them too.
//
// It imports the standard library, api/keyspace, internal/units,
// internal/memengine (its index names) and, for the admin API's message
// (api.go), api/tidekvpb.
package ksconfig
