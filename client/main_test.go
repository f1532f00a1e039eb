package client_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

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
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		node.s, node.err = server.Start(ctx, cfg)
	})
	if node.err != nil {
		fmt.Fprintf(os.Stderr, "client examples: starting an in-process node: %v\n", node.err)
		os.Exit(1)
	}
	return []string{node.s.Addr()}
}
