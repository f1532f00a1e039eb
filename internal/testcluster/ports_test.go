package testcluster

import (
	"testing"

	"github.com/tidekv/tidekv/internal/launcher"
)

func TestFreeBasePortHandsOutDisjointBlocks(t *testing.T) {
	const nodes = 3
	var bases []int
	for range 20 {
		bases = append(bases, FreeBasePort(t, nodes))
	}
	span := nodes * launcher.PortsPerNode
	for i, a := range bases {
		for _, b := range bases[i+1:] {
			if a < b+span && b < a+span {
				t.Fatalf("blocks at %d and %d overlap", a, b)
			}
		}
	}
}
