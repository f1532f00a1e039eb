// Package cache holds the decisions that make a key space behave as a
// cache (docs/keyspaces.md, "Capacity and eviction", "Read-through"): which
// keys a node evicts when its share of a key space is over the key space's
// capacity (Decide, pure, with the time passed in), the leaseholder's memory
// of when keys were last used (Recency), and the small pieces read-through
// needs (one fetch per key in flight, a bound on fetches per node). The
// server runs them; nothing here does I/O except Fetch.
package cache
