package testcluster

import (
	"sync"
	"testing"

	"github.com/tidekv/tidekv/internal/launcher"
)

const host = "127.0.0.1"

// handedOut remembers the port blocks given to tests in this process, so
// that a cluster whose nodes are momentarily down (its ports free) does not
// see its block given to another test.
var handedOut struct {
	mu     sync.Mutex
	blocks [][2]int // [first, last] port of each block
}

// FreeBasePort returns a base port (see launcher.Ports) whose block for the
// given number of nodes is free now and has not been handed out before in
// this test binary.
func FreeBasePort(t testing.TB, nodes int) int {
	t.Helper()
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	for attempt := 0; attempt < 50; attempt++ {
		base, err := launcher.FreeBasePort(host, nodes)
		if err != nil {
			t.Fatalf("testcluster: %v", err)
		}
		last := base + nodes*launcher.PortsPerNode - 1
		clash := false
		for _, b := range handedOut.blocks {
			if base <= b[1] && b[0] <= last {
				clash = true
				break
			}
		}
		if !clash {
			handedOut.blocks = append(handedOut.blocks, [2]int{base, last})
			return base
		}
	}
	t.Fatal("testcluster: could not find an unused port block")
	return 0
}
