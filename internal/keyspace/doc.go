// Package keyspace owns TideKV's named key spaces: their settings (mode,
// replication factor, engine, capacity, default TTL) with defaults and
// validation, the catalogue of the key spaces a cluster has, and where each
// key space's keys live among the keys ranges span.
//
// Every key space but the default one holds the keys that start with its
// reserved prefix, 0xFF 0xFF followed by its number (4 bytes, big endian),
// so two key spaces never share a range once ranges are split at these
// prefixes (Catalogue.Boundaries). The default key space, number 0, is every
// key outside the reserved prefix, as before key spaces existed. Inside an
// ordered key space the user's key follows the prefix; inside a hashed one
// an 8-byte hash of the user's key comes first, so the key space's ranges
// are intervals of hash values (docs/keyspaces.md).
//
// It imports the standard library, internal/units, internal/memengine
// (its index names) and, for the admin API's message (api.go),
// api/tidekvpb.
package keyspace
