package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"
)

// SeriesPoint is a node's request rate and p99 latency over one interval.
type SeriesPoint struct {
	T     int64   `json:"t"` // unix milliseconds at the end of the interval
	QPS   float64 `json:"qps"`
	P99Ms float64 `json:"p99_ms"`
}

// SeriesView is the body of GET /api/series.
type SeriesView struct {
	IntervalMs int64         `json:"interval_ms"`
	Points     []SeriesPoint `json:"points"`
}

// peerTimeout: a node that does not answer for its series within it is
// left out.
const peerTimeout = time.Second

// clusterSeries adds the other nodes' series to this node's: request rates
// summed and the worst p99 per interval, intervals aligned to the second.
func (n Node) clusterSeries(ctx context.Context, own []SeriesPoint) []SeriesPoint {
	lists := [][]SeriesPoint{own}
	var mu sync.Mutex
	var wg sync.WaitGroup
	hc, scheme := &http.Client{Timeout: peerTimeout}, "http://"
	if n.PeerTLS != nil {
		hc.Transport, scheme = &http.Transport{TLSClientConfig: n.PeerTLS}, "https://"
	}
	for _, addr := range n.Peers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+addr+"/api/series?local", nil)
			if err != nil {
				return
			}
			resp, err := hc.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			var v SeriesView
			if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&v) == nil {
				mu.Lock()
				lists = append(lists, v.Points)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return mergeSeries(lists...)
}

// mergeSeries combines per-node series: per second, rates add up and the
// cluster's p99 is taken as the worst node's (a bound, not a true quantile).
func mergeSeries(lists ...[]SeriesPoint) []SeriesPoint {
	bySecond := map[int64]*SeriesPoint{}
	for _, l := range lists {
		for _, p := range l {
			sec := (p.T + 500) / 1000
			m := bySecond[sec]
			if m == nil {
				m = &SeriesPoint{T: sec * 1000}
				bySecond[sec] = m
			}
			m.QPS += p.QPS
			m.P99Ms = max(m.P99Ms, p.P99Ms)
		}
	}
	out := make([]SeriesPoint, 0, len(bySecond))
	for _, p := range bySecond {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}
