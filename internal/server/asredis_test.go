package server

import (
	"testing"

	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/testutil/redisdiff"
)

// TestNodeAsRedis is the differential test (internal/testutil/redisdiff):
// the scripts and drawn sequences against redis-server and a one-node
// cluster's Redis listener, which must answer alike.
func TestNodeAsRedis(t *testing.T) {
	tc := startClusterWith(t, 1, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	// TTLs and transactions need the log version a new cluster reaches
	// shortly after it starts.
	tc.waitLogVersion(t, raftstore.LatestLogVersion)
	redisdiff.Check(t, tc.nodes[0].RedisAddr())
}
