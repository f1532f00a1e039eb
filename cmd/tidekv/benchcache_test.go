package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// bench cache --json runs both variants; pre-launch leaves no node full,
// T fixed at 95% does; an unbuilt scenario is refused.
func TestBenchCachePrelaunch(t *testing.T) {
	var out bytes.Buffer
	cmd := newCacheBenchCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--scenario", "prelaunch", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var reports []cacheReport
	if err := json.Unmarshal(out.Bytes(), &reports); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(reports) != 2 || reports[0].Variant != "prelaunch" || reports[1].Variant != "fixed-0.95" {
		t.Fatalf("reports %+v", reports)
	}
	if reports[0].FullNodeSeconds != 0 || reports[0].FirstFullSeconds != -1 || reports[1].FullNodeSeconds == 0 {
		t.Fatalf("full node-seconds %v (first full %v) with pre-launch, %v without", reports[0].FullNodeSeconds, reports[0].FirstFullSeconds, reports[1].FullNodeSeconds)
	}
	cmd = newCacheBenchCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--scenario", "paper-fig3"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `unknown scenario "paper-fig3" (built: prelaunch)`) {
		t.Fatalf("paper-fig3: %v", err)
	}
}
