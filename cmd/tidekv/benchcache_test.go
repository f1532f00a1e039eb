package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/tidekv/tidekv/bench/cachebench"
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
	if len(reports) != 2 || reports[0].Variant != "prelaunch" || reports[1].Variant != "fixed-0.9" {
		t.Fatalf("reports %+v", reports)
	}
	if reports[0].FullNodeSeconds != 0 || reports[0].FirstFullSeconds != -1 || reports[1].FullNodeSeconds == 0 {
		t.Fatalf("full node-seconds %v (first full %v) with pre-launch, %v without", reports[0].FullNodeSeconds, reports[0].FirstFullSeconds, reports[1].FullNodeSeconds)
	}
	cmd = newCacheBenchCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--scenario", "paper-fig4"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `unknown scenario "paper-fig4" (want paper-fig3, migration or prelaunch)`) {
		t.Fatalf("paper-fig4: %v", err)
	}
}

// runCacheBench runs bench cache with args and --json, decodes the output
// into v and checks that every object has the fields scripts read.
func runCacheBench(t *testing.T, v any, fields []string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := newCacheBenchCmd()
	cmd.SetOut(&out)
	cmd.SetArgs(append(args, "--json"))
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	var objs []map[string]any
	if err := json.Unmarshal(out.Bytes(), &objs); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		for _, f := range fields {
			if _, ok := o[f]; !ok {
				t.Fatalf("no field %q in %v", f, o)
			}
		}
	}
}

// The migration scenario, small: one report per index, each migration
// moving half the largest span (so the first moves half the keys), and
// the figure written.
func TestBenchCacheMigration(t *testing.T) {
	dir := t.TempDir()
	var reports []migrationReport
	runCacheBench(t, &reports, []string{"scenario", "index", "total_ms", "mean_ms", "min_ms", "max_ms", "migrations"},
		"--scenario", "migration", "--keys", "2000", "--value-bytes", "10",
		"--migrations", "3", "--rounds", "1", "--out", dir)
	want := []string{"btree", "eh100", "eh300", "eh500", "cbf"}
	if len(reports) != len(want) {
		t.Fatalf("reports %+v", reports)
	}
	for i, r := range reports {
		if r.Index != want[i] || r.Scenario != "migration" || len(r.Migrations) != 3 || r.Migrations[0].Keys != 1000 ||
			r.Migrations[1].Keys != 500 || r.TotalMs <= 0 || r.MinMs > r.MeanMs || r.MeanMs > r.MaxMs {
			t.Fatalf("report %+v", r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cache-migration.svg")); err != nil {
		t.Fatal(err)
	}
}

// The paper-fig3 scenario, small: every variant at every rate, the
// growing key space ending with a lower miss rate than static-2.
func TestBenchCacheFig3(t *testing.T) {
	dir := t.TempDir()
	var reports []fig3Report
	runCacheBench(t, &reports, []string{"scenario", "rate", "variant", "miss_rate", "nodes", "evicted", "node_steps"},
		"--scenario", "paper-fig3", "--keys", "8192", "--steps", "200", "--bucket-steps", "50",
		"--rates", "50,100", "--static-nodes", "2", "--capacity-per-node", "131072", "--out", dir)
	if len(reports) != 4 {
		t.Fatalf("reports %+v", reports)
	}
	for i, r := range reports {
		if r.Scenario != "paper-fig3" || r.Rate != []int{50, 50, 100, 100}[i] || len(r.MissRate) != 4 || len(r.Nodes) != 4 {
			t.Fatalf("report %+v", r)
		}
	}
	for _, i := range []int{0, 2} {
		st, el := reports[i], reports[i+1]
		if st.Variant != "static-2" || el.Variant != "elastic" || el.MissRate[3] >= st.MissRate[3] {
			t.Errorf("rate %d: %s ends at %.2f, %s at %.2f", st.Rate, st.Variant, st.MissRate[3], el.Variant, el.MissRate[3])
		}
	}
	for _, name := range []string{"cache-fig3-rate50.svg", "cache-fig3-rate100.svg"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// --real runs paper-fig3 and prelaunch only; flags set explicitly
// override the real-process scale, the others keep it.
func TestBenchCacheRealFlags(t *testing.T) {
	var out bytes.Buffer
	cmd := newCacheBenchCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--real", "--scenario", "migration"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `--real runs paper-fig3 and prelaunch, not "migration"`) {
		t.Fatalf("--real migration: %v", err)
	}
	f := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.Int("keys", 0, "")
	f.Int("max-nodes", 0, "")
	if err := f.Parse([]string{"--keys", "100", "--max-nodes", "3"}); err != nil {
		t.Fatal(err)
	}
	set := cachebench.DefaultFig3Config()
	set.Keys, set.MaxNodes, set.Seed = 100, 3, 7
	c, want := realFig3(f, set), cachebench.RealFig3Config()
	if c.Keys != 100 || c.MaxNodes != 3 || c.Seed != 7 || c.Steps != want.Steps || c.CapacityPerNode != want.CapacityPerNode {
		t.Fatalf("real fig3 config %+v", c)
	}
	p := realPrelaunch(f, cachebench.RealPrelaunchConfig(), set)
	if p.MaxNodes != 3 || p.CapacityPerNode != cachebench.RealPrelaunchConfig().CapacityPerNode {
		t.Fatalf("real prelaunch config %+v", p)
	}
}
