package scenario

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/server"
)

// plInProc is a cluster of nodes running inside this process
// (server.Start), for configurations set in server.Config rather than by
// flags (placement's replication factor and thresholds, the admission
// bound).
type plInProc struct {
	nodes []*server.Server
}

// plStartInProc starts n nodes in dir, node 1 creating the cluster and the
// others joining it; adjust changes each node's configuration.
func plStartInProc(ctx context.Context, dir string, n int, adjust func(*server.Config)) (*plInProc, error) {
	c := &plInProc{}
	for i := 1; i <= n; i++ {
		cfg := server.DefaultConfig()
		cfg.DataDir = filepath.Join(dir, fmt.Sprintf("node%d", i))
		cfg.GRPCAddr = plHost + ":0"
		cfg.HTTPAddr = plHost + ":0"
		cfg.Pebble.CacheSizeBytes = 64 << 20
		// Nodes in one process share one Go scheduler, so a queueing delay
		// is every node's at once: delay-based admission is off and the
		// in-flight bound alone sheds load (docs/admission.md).
		cfg.Admission.Target = 0
		if adjust != nil {
			adjust(&cfg)
		}
		if i > 1 {
			cfg.Join = []string{c.nodes[0].Addr()}
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := server.Start(sctx, cfg)
		cancel()
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("starting in-process node %d: %w", i, err)
		}
		c.nodes = append(c.nodes, s)
	}
	return c, nil
}

// addrs lists the nodes' gRPC addresses.
func (c *plInProc) addrs() []string {
	out := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		out[i] = s.Addr()
	}
	return out
}

// client returns a client of the cluster configured by adjust.
func (c *plInProc) client(adjust func(*client.Config)) (*client.Client, error) {
	cfg := client.DefaultConfig()
	cfg.Addrs = c.addrs()
	if adjust != nil {
		adjust(&cfg)
	}
	return client.New(cfg)
}

// stop stops every node.
func (c *plInProc) stop() {
	for _, s := range c.nodes {
		s.Stop()
	}
	c.nodes = nil
}
