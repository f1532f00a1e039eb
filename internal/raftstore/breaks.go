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
	// ClientClock: a transaction reads at the timestamp its client
	// proposes, from the client's clock, with no uncertainty window, not
	// at its coordinator's clock (server's coordinator; docs/transactions.md,
	// "Timestamps the cluster owns").
	ClientClock bool
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
	if b.ClientClock {
		on = append(on, "client-clock")
	}
	return strings.Join(on, ",")
}

// ParseBreaks reads a comma-separated list of modes ("": none).
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
			b.ClientClock = true
		default:
			return b, fmt.Errorf("unknown break %q (known: skip-refresh, skip-tscache, client-clock)", name)
		}
	}
	return b, nil
}
