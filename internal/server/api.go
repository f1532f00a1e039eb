package server

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/cliformat"
)

// The dashboard's JSON API (docs/dashboard.md). Each endpoint answers from
// the cluster as this node sees it, through the same Admin paths as
// `tidekv ctl`, so any node can serve the dashboard.

const apiTimeout = 3 * time.Second

func (s *Server) registerAPI(mux *http.ServeMux) {
	admin := &adminService{s: s}
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := admin.Status(ctx, &tidekvpb.StatusRequest{})
		writeAPI(w, err, func() any { return cliformat.StatusOf(resp) })
	})
	mux.HandleFunc("GET /api/ranges", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := admin.Ranges(ctx, &tidekvpb.RangesRequest{})
		writeAPI(w, err, func() any { return cliformat.RangesOf(resp) })
	})
	mux.HandleFunc("GET /api/events", func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := admin.Events(ctx, &tidekvpb.EventsRequest{Local: r.URL.Query().Has("local"), Limit: uint32(max(limit, 0))})
		writeAPI(w, err, func() any { return cliformat.EventsOf(resp.GetEvents()) })
	})
	mux.HandleFunc("GET /api/autoscale", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := admin.AutoscaleStatus(ctx, &tidekvpb.AutoscaleStatusRequest{})
		writeAPI(w, err, func() any { return json.RawMessage(resp.GetJson()) })
	})
	mux.HandleFunc("GET /api/series", func(w http.ResponseWriter, r *http.Request) {
		points := s.metrics.points()
		if !r.URL.Query().Has("local") {
			ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
			defer cancel()
			points = s.clusterSeries(ctx, points)
		}
		writeAPI(w, nil, func() any { return seriesView{IntervalMs: seriesInterval.Milliseconds(), Points: points} })
	})
}

type seriesView struct {
	IntervalMs int64         `json:"interval_ms"`
	Points     []seriesPoint `json:"points"`
}

func writeAPI(w http.ResponseWriter, err error, view func() any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(view())
}

// clusterSeries adds the other nodes' series to this node's: request rates
// summed and the worst p99 per interval, intervals aligned to the second.
// A node that does not answer within a second is left out.
func (s *Server) clusterSeries(ctx context.Context, own []seriesPoint) []seriesPoint {
	lists := [][]seriesPoint{own}
	var mu sync.Mutex
	var wg sync.WaitGroup
	hc, scheme := &http.Client{Timeout: time.Second}, "http://"
	if tc := s.peerTLS(); tc != nil {
		hc.Transport, scheme = &http.Transport{TLSClientConfig: tc}, "https://"
	}
	for _, n := range s.dir.list() {
		if n.GetNodeId() == s.nodeID || n.GetHttpAddr() == "" {
			continue
		}
		wg.Add(1)
		go func(addr string) {
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
			var v seriesView
			if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&v) == nil {
				mu.Lock()
				lists = append(lists, v.Points)
				mu.Unlock()
			}
		}(n.GetHttpAddr())
	}
	wg.Wait()
	return mergeSeries(lists...)
}

// mergeSeries combines per-node series: per second, rates add up and the
// cluster's p99 is taken as the worst node's (a bound, not a true quantile).
func mergeSeries(lists ...[]seriesPoint) []seriesPoint {
	bySecond := map[int64]*seriesPoint{}
	for _, l := range lists {
		for _, p := range l {
			sec := (p.T + 500) / 1000
			m := bySecond[sec]
			if m == nil {
				m = &seriesPoint{T: sec * 1000}
				bySecond[sec] = m
			}
			m.QPS += p.QPS
			m.P99Ms = max(m.P99Ms, p.P99Ms)
		}
	}
	out := make([]seriesPoint, 0, len(bySecond))
	for _, p := range bySecond {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}
