package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/tidekv/tidekv/internal/security"
)

// The dashboard's JSON API (docs/dashboard.md). Each endpoint answers from
// the cluster as this node sees it.

// apiTimeout bounds each API request's Admin call.
const apiTimeout = 3 * time.Second

// registerAPI mounts the JSON API. Each endpoint needs the role of its
// Admin twin: Status, Ranges, Events, AutoscaleStatus and NodeLoads
// (series) are read, Settings admin.
func (n Node) registerAPI(m *mux) {
	// answer serves one Admin call's view, within apiTimeout.
	answer := func(pattern string, need security.Role, call func(ctx context.Context, r *http.Request) (any, error)) {
		m.handleFunc(pattern, need, func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
			defer cancel()
			v, err := call(ctx, r)
			writeJSON(w, err, v)
		})
	}
	answer("GET /api/status", security.RoleRead, func(ctx context.Context, _ *http.Request) (any, error) {
		return n.Admin.Status(ctx)
	})
	answer("GET /api/ranges", security.RoleRead, func(ctx context.Context, _ *http.Request) (any, error) {
		return n.Admin.Ranges(ctx)
	})
	answer("GET /api/events", security.RoleRead, func(ctx context.Context, r *http.Request) (any, error) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		return n.Admin.Events(ctx, r.URL.Query().Has("local"), max(limit, 0))
	})
	answer("GET /api/autoscale", security.RoleRead, func(ctx context.Context, _ *http.Request) (any, error) {
		return n.Admin.Autoscale(ctx)
	})
	answer("GET /api/series", security.RoleRead, func(ctx context.Context, r *http.Request) (any, error) {
		points := n.Series()
		if !r.URL.Query().Has("local") {
			points = n.clusterSeries(ctx, points)
		}
		return SeriesView{IntervalMs: n.SeriesInterval.Milliseconds(), Points: points}, nil
	})
	// Who the dashboard's user is, so that the page offers each role what
	// it may do (the settings form to admins only).
	answer("GET /api/whoami", security.RoleRead, func(_ context.Context, r *http.Request) (any, error) {
		if id, ok := security.IdentityOf(r); ok {
			return whoamiView{Secure: true, User: id.User, Role: id.Role.String()}, nil
		}
		return whoamiView{Role: security.RoleAdmin.String()}, nil
	})
	settings := func(ctx context.Context, set ...Setting) (any, error) {
		all, err := n.Admin.Settings(ctx, set...)
		if all == nil {
			all = []Setting{}
		}
		return map[string][]Setting{"settings": all}, err
	}
	answer("GET /api/settings", security.RoleAdmin, func(ctx context.Context, _ *http.Request) (any, error) {
		return settings(ctx)
	})
	m.handleFunc("POST /api/settings", security.RoleAdmin, func(w http.ResponseWriter, r *http.Request) {
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
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		v, err := settings(ctx, Setting{Key: set.Key, Value: set.Value})
		writeJSON(w, err, v)
	})
}

type whoamiView struct {
	Secure bool   `json:"secure"`
	User   string `json:"user,omitempty"`
	Role   string `json:"role"`
}

// writeJSON answers v, or 503 with err: the node could not reach what it
// needed to answer.
func writeJSON(w http.ResponseWriter, err error, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}
