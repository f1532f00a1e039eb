package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

const exposition = `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
# TYPE tidekv_raft_syncs_total counter
tidekv_raft_syncs_total 3000
tidekv_raft_syncs_other_total 7
tidekv_redis_commands_total{command="get",result="ok"} 99
tidekv_process_write_bytes_total 1.048576e+06 1700000000000
`

func TestParseCounters(t *testing.T) {
	c, err := ParseCounters(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if c != (Counters{CPUSeconds: 12.5, Fsyncs: 3000, BytesWritten: 1 << 20}) {
		t.Fatalf("parsed %+v", c)
	}
	c, err = ParseCounters(strings.NewReader("process_cpu_seconds_total 1\n"))
	if err != nil || c.CPUSeconds != 1 || !math.IsNaN(c.Fsyncs) || !math.IsNaN(c.BytesWritten) {
		t.Fatalf("a page without the TideKV counters: %+v, %v (want them NaN)", c, err)
	}
	if _, err := ParseCounters(strings.NewReader("tidekv_raft_syncs_total many\n")); err == nil {
		t.Fatal("an unreadable value was accepted")
	}
}

func TestCostOfSumsNodes(t *testing.T) {
	before := []Counters{{1, 10, 1000}, {2, 20, 2000}, {3, 30, 3000}}
	after := []Counters{{1.5, 60, 6000}, {2.25, 45, 4500}, {3.25, 45, 4500}}
	c := costOf(before, after, 1000)
	// 1 s of CPU, 90 fsyncs and 9,000 bytes over 1,000 operations.
	want := map[string]float64{"cpu": 1000, "fsyncs": 0.09, "bytes": 9}
	got := map[string]*float64{"cpu": c.ServerCPUMicrosPerOp, "fsyncs": c.FsyncsPerOp, "bytes": c.BytesWrittenPerOp}
	for k, w := range want {
		if got[k] == nil || math.Abs(*got[k]-w) > 1e-9 {
			t.Errorf("%s per op = %v, want %v", k, got[k], w)
		}
	}
	if c.Nodes != 3 || c.Error != "" {
		t.Fatalf("nodes %d, error %q", c.Nodes, c.Error)
	}
}

func TestCostOfUnknowns(t *testing.T) {
	nan := math.NaN()
	// Node 2 restarted (its CPU went down) and exports no fsync counter.
	c := costOf([]Counters{{1, 1, 1}, {5, nan, 1}}, []Counters{{2, 2, 2}, {1, nan, 2}}, 10)
	if c.ServerCPUMicrosPerOp != nil || c.FsyncsPerOp != nil {
		t.Fatalf("cpu %v, fsyncs %v: want both unknown", c.ServerCPUMicrosPerOp, c.FsyncsPerOp)
	}
	if c.BytesWrittenPerOp == nil || *c.BytesWrittenPerOp != 0.2 {
		t.Fatalf("bytes per op %v, want 0.2", c.BytesWrittenPerOp)
	}
	if c := costOf(make([]Counters, 2), make([]Counters, 3), 10); c.Error == "" || c.Nodes != 0 {
		t.Fatalf("samples of different sizes gave %+v", c)
	}
	if c := costOf(make([]Counters, 2), make([]Counters, 2), 0); c.Error == "" {
		t.Fatal("a phase without operations got a cost")
	}
}

func TestRunWithCostReportsEachPhase(t *testing.T) {
	var calls atomic.Int64
	// Every sample adds 1 ms of CPU and one fsync per node.
	probe := func(context.Context) ([]Counters, error) {
		n := float64(calls.Add(1))
		return []Counters{{n / 1000, n, 100 * n}, {n / 1000, n, 100 * n}}, nil
	}
	cfg := testConfig("a")
	res, err := RunWithCost(context.Background(), cfg, newMemStore(), nil, probe)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*PhaseResult{res.Load, res.Run} {
		ops := float64(p.Operations)
		if p.ServerCPUMicrosPerOp == nil || math.Abs(*p.ServerCPUMicrosPerOp-2000/ops) > 1e-6 {
			t.Errorf("%s: cpu per op %v, want %v", p.Phase, p.ServerCPUMicrosPerOp, 2000/ops)
		}
		if p.FsyncsPerOp == nil || math.Abs(*p.FsyncsPerOp-2/ops) > 1e-9 {
			t.Errorf("%s: fsyncs per op %v, want %v", p.Phase, p.FsyncsPerOp, 2/ops)
		}
	}
	var js bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var parsed struct{ Run map[string]any }
	if err := json.Unmarshal(js.Bytes(), &parsed); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"server_cpu_us_per_op", "fsyncs_per_op", "bytes_written_per_op", "cost_nodes"} {
		if _, ok := parsed.Run[k]; !ok {
			t.Errorf("the JSON run phase has no %s: %s", k, js.String())
		}
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "server cost per operation, summed over 2 nodes") {
		t.Fatalf("the table has no cost line:\n%s", table.String())
	}
}

func TestRunWithoutProbeHasNoCost(t *testing.T) {
	res, err := Run(context.Background(), testConfig("c"), newMemStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(js.String(), "per_op") || strings.Contains(js.String(), "cost_") {
		t.Fatalf("a run without a probe reports a cost: %s", js.String())
	}
}

func TestHTTPProbe(t *testing.T) {
	var cpu atomic.Int64
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "process_cpu_seconds_total %d\ntidekv_raft_syncs_total 4\ntidekv_process_write_bytes_total 8\n", cpu.Add(1))
	}))
	defer ok.Close()
	addr := strings.TrimPrefix(ok.URL, "http://")
	got, err := HTTPProbe([]string{addr, addr}, nil)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Fsyncs != 4 || got[1].BytesWritten != 8 || got[0].CPUSeconds+got[1].CPUSeconds != 3 {
		t.Fatalf("sampled %+v", got)
	}
	broken := httptest.NewServer(http.NotFoundHandler())
	defer broken.Close()
	if _, err := HTTPProbe([]string{addr, strings.TrimPrefix(broken.URL, "http://")}, nil)(context.Background()); err == nil {
		t.Fatal("a node whose metrics cannot be read did not fail the sample")
	}
}
