package client_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/server"
)

// node is the one in-process TideKV node the examples (example_test.go)
// talk to over loopback gRPC. It starts on first use, not in TestMain, so
// that `go test -run TestX` of the package's unit tests (which use a fake
// cluster) does not pay for it; TestMain stops it after every test ran.
var node struct {
	once sync.Once
	dir  string
	s    *server.Server
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if node.s != nil {
		node.s.Stop()
	}
	if node.dir != "" {
		os.RemoveAll(node.dir)
	}
	os.Exit(code)
}

// addrs returns the gRPC address of the examples' node, starting it the
// first time. A node that cannot start ends the test binary: every example
// needs it.
func addrs() []string {
	node.once.Do(func() {
		node.dir, node.err = os.MkdirTemp("", "tidekv-client-examples-")
		if node.err != nil {
			return
		}
		cfg := server.DefaultConfig()
		cfg.DataDir = node.dir
		cfg.InMemory = true
		cfg.GRPCAddr = "127.0.0.1:0"
		cfg.HTTPAddr = ""
		// A new node moves its ranges to the versioned layout (which reads
		// at a timestamp and transactions need) once a heartbeat has raised
		// the cluster's log version, from its report loop: both run often
		// here so that the wait below is short.
		cfg.HeartbeatInterval = 100 * time.Millisecond
		cfg.ReportInterval = 100 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if node.s, node.err = server.Start(ctx, cfg); node.err == nil {
			node.err = waitVersioned(ctx, node.s)
		}
	})
	if node.err != nil {
		fmt.Fprintf(os.Stderr, "client examples: starting an in-process node: %v\n", node.err)
		os.Exit(1)
	}
	return []string{node.s.Addr()}
}

// waitVersioned waits until every user range of s is on the versioned
// layout, so that every example sees the same cluster whenever it runs.
func waitVersioned(ctx context.Context, s *server.Server) error {
	for {
		pending := 0
		for _, r := range s.Store().Replicas() {
			if r.RangeID() != keys.MetaRangeID && !r.VersionedLayout() {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d ranges still on the unversioned layout: %w", pending, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
