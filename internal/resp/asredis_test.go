package resp

import (
	"testing"

	"github.com/tidekv/tidekv/internal/testutil/redisdiff"
)

// TestAsRedis is the differential test (internal/testutil/redisdiff) of
// the protocol mapping alone: the scripts and drawn sequences against
// redis-server and this package over the in-memory KV.
// internal/server's TestNodeAsRedis runs them against a node.
func TestAsRedis(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	redisdiff.Check(t, s.Addr().String())
}
