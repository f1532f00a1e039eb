package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
)

// collectCounter counts how often the registry collects it.
type collectCounter struct{ n int }

func (c *collectCounter) Describe(chan<- *prometheus.Desc) {}
func (c *collectCounter) Collect(chan<- prometheus.Metric) { c.n++ }

// Sample takes the series' point from the KV latency histogram alone:
// the node's other collectors (the Go and process ones read /proc) are
// not gathered every second for it.
func TestSampleReadsOnlyTheLatencyHistogram(t *testing.T) {
	m := New()
	other := &collectCounter{}
	m.Reg.MustRegister(other)
	t0 := time.Unix(100, 0)
	m.Sample(t0)
	for range 4 {
		m.Observe("get", time.Now().Add(-3*time.Millisecond), codes.OK)
	}
	m.Sample(t0.Add(2 * time.Second))
	if other.n != 0 {
		t.Fatalf("the registry's other collectors were gathered %d times", other.n)
	}
	p := m.Latest()
	if p.QPS != 2 || p.P99Ms <= 1.6 || p.P99Ms > 3.2 {
		t.Fatalf("point %+v, want 2 requests/s with a p99 in 3 ms's bucket (1.6-3.2 ms)", p)
	}
}
