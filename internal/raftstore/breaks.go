package raftstore

import (
	"fmt"
	"strings"
)

// Breaks are deliberately broken modes of transactions, the negative
// controls of the transactional anomaly checker (`tidekv bench chaos
// --workload txn --break`, docs/testing.md): with one set, the cluster
// commits transactions that are not serializable, and the checker must
// say so. All are off by default; never set one in production. Every node
// of a cluster gets the same (the hidden node flag --testing-break).
type Breaks struct {
	// SkipRefresh: a two-phase commit whose writes were pushed above its
	// read timestamp commits without checking its reads again up to the
	// commit timestamp (server's coordinator).
	SkipRefresh bool
	// SkipTSCache: writes are stamped at the time asked, not above the
	// reads the timestamp cache recorded on their keys (readOrder).
	SkipTSCache bool
}

// String is b as ParseBreaks reads it.
func (b Breaks) String() string {
	var on []string
	if b.SkipRefresh {
		on = append(on, "skip-refresh")
	}
	if b.SkipTSCache {
		on = append(on, "skip-tscache")
	}
	return strings.Join(on, ",")
}

// ParseBreaks reads a comma-separated list of modes ("": none).
// client-clock, reads at a client's stale clock, is a mode of the
// cluster-owned timestamps (docs/transactions.md) and is refused until the
// cluster assigns read timestamps: today every transaction reads at its
// client's clock.
func ParseBreaks(s string) (Breaks, error) {
	var b Breaks
	for _, name := range strings.Split(s, ",") {
		switch strings.TrimSpace(name) {
		case "":
		case "skip-refresh":
			b.SkipRefresh = true
		case "skip-tscache":
			b.SkipTSCache = true
		case "client-clock":
			return b, fmt.Errorf("break client-clock: read timestamps still come from the client's clock, so there is no cluster-owned timestamp to break yet")
		default:
			return b, fmt.Errorf("unknown break %q (known: skip-refresh, skip-tscache)", name)
		}
	}
	return b, nil
}
