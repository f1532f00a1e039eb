package main

import (
	"strings"
	"testing"
)

// A co-runner on real processes takes a share of node 1's quota, so
// unsized nodes are refused before anything starts.
func TestBenchElasticHogNeedsSizedNodes(t *testing.T) {
	cmd := newElasticBenchCmd()
	cmd.SetArgs([]string{"--hog", "0.5", "--scenario", "step", "--controller", "static", "--out", t.TempDir()})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--node-cpus") {
		t.Fatalf("--hog without --node-cpus: %v, want a refusal naming --node-cpus", err)
	}
}

// The label names the variant: aware or plain, with the hog's share.
func TestInterferenceLabel(t *testing.T) {
	for _, c := range []struct {
		v    interference
		want string
	}{
		{interference{}, "combined"},
		{interference{hog: 0.5}, "combined-hog50%"},
		{interference{hog: 0.5, plain: true}, "combined-hog50%-plain"},
	} {
		if got := c.v.label("combined"); got != c.want {
			t.Errorf("%+v: label %q, want %q", c.v, got, c.want)
		}
	}
}
