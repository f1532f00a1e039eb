package server

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/cliformat"
	"github.com/tidekv/tidekv/internal/security"
)

// The dashboard's JSON API (docs/dashboard.md). Each endpoint answers from
// the cluster as this node sees it, through the same Admin paths as
// `tidekv ctl`, so any node can serve the dashboard.

const apiTimeout = 3 * time.Second

// Each needs the role of its Admin twin: Status, Ranges, Events,
// AutoscaleStatus and NodeLoads (series) are read, Settings admin.
func (s *Server) registerAPI(mux *httpMux) {
	admin := &adminService{s: s}
	mux.handleFunc("GET /api/status", security.RoleRead, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := admin.Status(ctx, &tidekvpb.StatusRequest{})
		writeAPI(w, err, func() any { return cliformat.StatusOf(resp) })
	})
	mux.handleFunc("GET /api/ranges", security.RoleRead, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := admin.Ranges(ctx, &tidekvpb.RangesRequest{})
		writeAPI(w, err, func() any { return cliformat.RangesOf(resp) })
	})
	mux.handleFunc("GET /api/events", security.RoleRead, func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := admin.Events(ctx, &tidekvpb.EventsRequest{Local: r.URL.Query().Has("local"), Limit: uint32(max(limit, 0))})
		writeAPI(w, err, func() any { return cliformat.EventsOf(resp.GetEvents()) })
	})
	mux.handleFunc("GET /api/autoscale", security.RoleRead, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := admin.AutoscaleStatus(ctx, &tidekvpb.AutoscaleStatusRequest{})
		writeAPI(w, err, func() any { return json.RawMessage(resp.GetJson()) })
	})
	mux.handleFunc("GET /api/series", security.RoleRead, func(w http.ResponseWriter, r *http.Request) {
		points := s.metrics.points()
		if !r.URL.Query().Has("local") {
			ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
			defer cancel()
			points = s.clusterSeries(ctx, points)
		}
		writeAPI(w, nil, func() any { return seriesView{IntervalMs: seriesInterval.Milliseconds(), Points: points} })
	})
	// Who the dashboard's user is, so that the page offers each role what
	// it may do (the settings form to admins only).
	mux.handleFunc("GET /api/whoami", security.RoleRead, func(w http.ResponseWriter, r *http.Request) {
		v := whoamiView{Role: security.RoleAdmin.String()}
		if id, ok := security.IdentityOf(r); ok {
			v = whoamiView{Secure: true, User: id.User, Role: id.Role.String()}
		}
		writeAPI(w, nil, func() any { return v })
	})
	settings := func(w http.ResponseWriter, r *http.Request, req *tidekvpb.SettingsRequest) {
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		resp, err := admin.Settings(ctx, req)
		writeAPI(w, err, func() any { return settingsView(resp) })
	}
	mux.handleFunc("GET /api/settings", security.RoleAdmin, func(w http.ResponseWriter, r *http.Request) {
		settings(w, r, &tidekvpb.SettingsRequest{})
	})
	mux.handleFunc("POST /api/settings", security.RoleAdmin, func(w http.ResponseWriter, r *http.Request) {
		// JSON only: a page of another site cannot post JSON here without
		// a CORS preflight, which the node never grants.
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			http.Error(w, "POST /api/settings takes application/json: {\"key\": ..., \"value\": ...}", http.StatusUnsupportedMediaType)
			return
		}
		var set struct{ Key, Value string }
		if err := json.NewDecoder(r.Body).Decode(&set); err != nil || set.Key == "" {
			http.Error(w, fmt.Sprintf("POST /api/settings takes {\"key\": ..., \"value\": ...} with a key (%v)", err), http.StatusBadRequest)
			return
		}
		settings(w, r, &tidekvpb.SettingsRequest{Set: []*tidekvpb.Setting{{Key: set.Key, Value: set.Value}}})
	})
}

type whoamiView struct {
	Secure bool   `json:"secure"`
	User   string `json:"user,omitempty"`
	Role   string `json:"role"`
}

type settingView struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func settingsView(resp *tidekvpb.SettingsResponse) map[string][]settingView {
	out := []settingView{}
	for _, st := range resp.GetSettings() {
		out = append(out, settingView{st.GetKey(), st.GetValue()})
	}
	return map[string][]settingView{"settings": out}
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
	for _, n := range s.dir.List() {
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
