package main

import (
	"slices"
	"testing"
)

// A node the local actuator starts inherits this node's settings, not its
// directory, addresses or join list.
func TestInheritedArgs(t *testing.T) {
	got := inheritedArgs([]string{"--data-dir", "d/node1", "--listen=127.0.0.1:7400", "--replication-factor", "3",
		"--http-listen", "127.0.0.1:7401", "--autoscale", "--join", "a,b", "--redis-listen=x", "--autoscale-max-nodes", "4"})
	want := []string{"--replication-factor", "3", "--autoscale", "--autoscale-max-nodes", "4"}
	if !slices.Equal(got, want) {
		t.Fatalf("inherited %q, want %q", got, want)
	}
}
