// Package keyspace owns where each named key space's keys live among the
// keys ranges span, and how a request names its key space: what both the
// Go client and the nodes need. Settings, validation and the catalogue of
// a cluster's key spaces are internal/ksconfig's.
//
// Every key space but the default one holds the keys that start with its
// reserved prefix, 0xFF 0xFF followed by its number (4 bytes, big endian),
// so two key spaces never share a range once ranges are split at these
// prefixes (ksconfig.Catalogue.Boundaries). The default key space, number
// 0, is every key outside the reserved prefix, as before key spaces
// existed. Inside an ordered key space the user's key follows the prefix;
// inside a hashed one an 8-byte hash of the user's key comes first, so the
// key space's ranges are intervals of hash values (docs/keyspaces.md).
//
// The package imports the standard library only: it
// imports nothing under internal/ (internal/lint).
package keyspace
