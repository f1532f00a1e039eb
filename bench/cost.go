package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Counters are one server process's cumulative cost counters. A counter the
// node does not export is NaN, so that any sum over it is unknown rather
// than low.
type Counters struct {
	CPUSeconds   float64 // process CPU time, user and system
	Fsyncs       float64 // synced Raft state batches
	BytesWritten float64 // bytes the process caused to be written to storage
}

// The metric each counter is read from, as TideKV nodes export them.
var costMetrics = map[string]func(*Counters) *float64{
	"process_cpu_seconds_total":        func(c *Counters) *float64 { return &c.CPUSeconds },
	"tidekv_raft_syncs_total":          func(c *Counters) *float64 { return &c.Fsyncs },
	"tidekv_process_write_bytes_total": func(c *Counters) *float64 { return &c.BytesWritten },
}

// Probe samples the cumulative counters of every server process, one entry
// per process, in the same order at every call.
type Probe func(ctx context.Context) ([]Counters, error)

// Cost is what the servers spent on a phase, per operation, summed over
// every process the probe sampled. A figure is nil when some process did not
// export its counter.
type Cost struct {
	ServerCPUMicrosPerOp *float64 `json:"server_cpu_us_per_op,omitempty"`
	FsyncsPerOp          *float64 `json:"fsyncs_per_op,omitempty"`
	BytesWrittenPerOp    *float64 `json:"bytes_written_per_op,omitempty"`
	// Nodes is how many server processes the figures sum over.
	Nodes int `json:"cost_nodes,omitempty"`
	// Error says why the cost could not be measured; the figures are then
	// absent.
	Error string `json:"cost_error,omitempty"`
}

// costOf turns two samples into per-operation figures. A process whose
// counters went down (it restarted during the phase) makes them unknown.
func costOf(before, after []Counters, ops int64) Cost {
	if len(before) != len(after) {
		return Cost{Error: fmt.Sprintf("the probe sampled %d processes before the phase and %d after", len(before), len(after))}
	}
	if ops <= 0 {
		return Cost{Error: "no operations ran"}
	}
	var sum Counters
	for i := range before {
		for _, field := range costMetrics {
			d := *field(&after[i]) - *field(&before[i])
			if d < 0 {
				d = math.NaN()
			}
			*field(&sum) += d
		}
	}
	perOp := func(v, scale float64) *float64 {
		if math.IsNaN(v) {
			return nil
		}
		x := v * scale / float64(ops)
		return &x
	}
	return Cost{
		ServerCPUMicrosPerOp: perOp(sum.CPUSeconds, 1e6),
		FsyncsPerOp:          perOp(sum.Fsyncs, 1),
		BytesWrittenPerOp:    perOp(sum.BytesWritten, 1),
		Nodes:                len(before),
	}
}

// ParseCounters reads the cost counters from a Prometheus text exposition.
// Only unlabelled samples count; a missing metric is NaN.
func ParseCounters(r io.Reader) (Counters, error) {
	c := Counters{CPUSeconds: math.NaN(), Fsyncs: math.NaN(), BytesWritten: math.NaN()}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		field := costMetrics[name]
		if !ok || field == nil {
			continue
		}
		value, _, _ := strings.Cut(strings.TrimSpace(rest), " ") // drop a timestamp
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return c, fmt.Errorf("metric %s has the unreadable value %q", name, value)
		}
		*field(&c) = v
	}
	return c, sc.Err()
}

// HTTPProbe samples the /metrics page of every HTTP address (host:port) at
// once; any page that cannot be read fails the sample. A non-nil tc reads
// them over HTTPS (a cluster started with --certs-dir).
func HTTPProbe(addrs []string, tc *tls.Config) Probe {
	hc, scheme := &http.Client{Timeout: 5 * time.Second}, "http://"
	if tc != nil {
		hc.Transport, scheme = &http.Transport{TLSClientConfig: tc}, "https://"
	}
	return func(ctx context.Context) ([]Counters, error) {
		out := make([]Counters, len(addrs))
		errs := make([]error, len(addrs))
		var wg sync.WaitGroup
		for i, addr := range addrs {
			wg.Go(func() { out[i], errs[i] = scrape(ctx, hc, scheme+addr) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

func scrape(ctx context.Context, hc *http.Client, base string) (Counters, error) {
	url := base + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Counters{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Counters{}, fmt.Errorf("read the metrics of %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Counters{}, fmt.Errorf("read the metrics of %s: %s", url, resp.Status)
	}
	c, err := ParseCounters(resp.Body)
	if err != nil {
		return c, fmt.Errorf("read the metrics of %s: %w", base, err)
	}
	return c, nil
}
