package testcluster

import (
	"testing"

	"github.com/tidekv/tidekv/internal/launcher"
)

const host = "127.0.0.1"

// FreeBasePort returns a base port (see launcher.Ports) whose block for the
// given number of nodes is free now and reserved for this test binary's
// life (launcher.FreeBasePort), so that a cluster whose nodes are
// momentarily down (its ports free) does not see its block given to
// another test, of this binary or another.
func FreeBasePort(t testing.TB, nodes int) int {
	t.Helper()
	base, err := launcher.FreeBasePort(host, nodes)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	return base
}
