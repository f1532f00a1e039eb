package ksconfig

import (
	"fmt"
	"time"
)

// The bounds of a GC TTL, the cluster's gc-ttl and a key space's alike:
// above the clock offsets the HLC tolerates (a safe point must be well
// behind any write in flight), and at most a month (a longer retention
// keeps a month of every overwrite).
const (
	MinGCTTL = time.Second
	MaxGCTTL = 30 * 24 * time.Hour
)

// GCTTL is the retention a key space's ranges are collected with, and
// where it came from (for the GC queue's events and the docs' rule).
type GCTTL struct {
	TTL time.Duration
	Why string
}

// GCTTLFor chooses the key space's GC TTL: its own when set; else, with
// the memory engine, the longest a transaction may read at its start
// timestamp (longestTxn, the node's --txn-max-duration), since a cache
// needs no history that no running reader can ask for, and never more
// than the cluster's; else the cluster's gc-ttl. Reads below the chosen
// retention fail, as they do below the cluster's (docs/keyspaces.md
// "GC TTL").
func (s Settings) GCTTLFor(cluster, longestTxn time.Duration) GCTTL {
	switch {
	case s.GCTTL > 0:
		return GCTTL{TTL: s.GCTTL, Why: fmt.Sprintf("key space %s's gc-ttl", s.Name)}
	case s.Engine == Memory:
		ttl := min(cluster, max(longestTxn, MinGCTTL))
		return GCTTL{TTL: ttl, Why: fmt.Sprintf("memory key space %s's default gc-ttl (the longest transaction, at most the cluster's)", s.Name)}
	}
	return GCTTL{TTL: cluster, Why: "the cluster's gc-ttl"}
}

// checkGCTTL accepts 0 (the engine's default) or whole milliseconds
// within the bounds.
func checkGCTTL(ttl time.Duration) error {
	switch {
	case ttl < 0:
		return fmt.Errorf("gc-ttl %s must not be negative (0: the engine's default)", ttl)
	case ttl == 0:
		return nil
	case ttl < MinGCTTL || ttl > MaxGCTTL:
		return fmt.Errorf("gc-ttl %s must be between %s and %s (0: the engine's default)", ttl, MinGCTTL, MaxGCTTL)
	case ttl%time.Millisecond != 0:
		return fmt.Errorf("gc-ttl %s must be whole milliseconds", ttl)
	}
	return nil
}
