package resp

import (
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testutil/manualclock"

	"github.com/tidekv/tidekv/internal/testutil/redisdiff"
)

// TestAsRedis is the differential test (internal/testutil/redisdiff) of
// the protocol mapping alone: the scripts and drawn sequences against
// redis-server and this package over the in-memory KV.
// internal/server's TestNodeAsRedis runs them against a node.
func TestAsRedis(t *testing.T) {
	kv := asRedisKV()
	s, _ := start(t, kv, func(c *Config) { c.Now = kv.clock.Now }, nil)
	redisdiff.Check(t, s.Addr().String())
}

// asRedisKV is an in-memory KV whose clock, which the server reads too
// (EXEC's TTLs), stands at the wall clock's now, as redis-server's runs
// (EXPIREAT of a time the scripts write).
func asRedisKV() *fakeKV {
	kv := newFakeKV()
	kv.clock = manualclock.New(time.Now())
	return kv
}
