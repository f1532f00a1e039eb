package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
)

// A range's lease moves to the locality its writes come from, and stays.
func TestLeaseFollowsTheWriters(t *testing.T) {
	regions := []string{"region=a", "region=b", "region=c"}
	i := 0
	tc := startClusterWith(t, 3, func(c *Config) {
		c.Locality = regions[i]
		i++
		c.ReportInterval = 300 * time.Millisecond
		// Following the writers is a rebalancing policy; the replicas'
		// additions at start would hold the range for a default
		// cool-down.
		c.Placement.Rebalance, c.Placement.Merges = true, false
		c.Placement.RangeCooldown = time.Second
	})
	tc.waitReplicated(tc.client(), 3)
	key := []byte("hot")
	leaseholder := func() *Server {
		for _, s := range tc.nodes {
			if r := s.Store().LookupKey(key); r != nil && r.IsLeader() {
				return s
			}
		}
		return nil
	}
	writer := tc.nodes[0]
	for _, s := range tc.nodes {
		if s != leaseholder() {
			writer = s // writes come from a locality without the lease
		}
	}
	origin := writer.cfg.Locality
	ccfg := client.DefaultConfig()
	ccfg.Addrs = tc.addrs()
	ccfg.Locality = origin
	c, err := client.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	write := func(n int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for j := 0; j < n; j++ {
			c.Put(ctx, key, []byte(fmt.Sprint(j)))
		}
	}
	eventually(t, 20*time.Second, "the lease to reach "+origin, func() error {
		write(150)
		if lh := leaseholder(); lh != writer {
			return fmt.Errorf("leaseholder is %v", lh)
		}
		return nil
	})
	es := writer.events.List(0)
	found := false
	for _, s := range tc.nodes {
		for _, e := range s.events.List(0) {
			if e.GetKind() == "lease-transfer" && strings.Contains(e.GetReason(), "follow the writers") && strings.Contains(e.GetReason(), origin) {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no lease-transfer event naming %s: %v", origin, es)
	}
	// The same writers keep it where it is.
	for range 5 {
		write(150)
		time.Sleep(100 * time.Millisecond)
		if lh := leaseholder(); lh != nil && lh != writer {
			t.Fatalf("lease left the writers' locality for node %d", lh.NodeID())
		}
	}
}
