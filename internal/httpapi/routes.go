package httpapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/tidekv/tidekv/internal/cliformat"
	"github.com/tidekv/tidekv/internal/security"
)

// Node is what the HTTP port serves from one node.
type Node struct {
	// ID is the node's ID, read per request: a joining node learns it
	// after its port opened.
	ID func() uint64
	// Serving reports whether the node serves requests (/health, /ready).
	Serving func() bool
	Admin   Admin
	// Metrics serves the Prometheus scrape.
	Metrics http.Handler
	// Series is this node's request series, oldest first; SeriesInterval
	// the time between its points.
	Series         func() []SeriesPoint
	SeriesInterval time.Duration
	// Peers are the other nodes' HTTP addresses, for the cluster's series;
	// PeerTLS dials them (nil: plaintext).
	Peers   func() []string
	PeerTLS *tls.Config
	// Auth authenticates requests of a secure node; nil on an insecure
	// node, where no one is asked.
	Auth *security.HTTPAuth
	// Pprof serves /debug/pprof/ (to admins).
	Pprof bool
	// Faults, when set, serves /debug/faults (to admins).
	Faults http.Handler
}

// Admin is the cluster as the node sees it, through the same admin paths
// as `tidekv ctl`, so that any node can serve the dashboard. Errors are
// shown to the caller as they are.
type Admin interface {
	Status(ctx context.Context) (cliformat.StatusView, error)
	Ranges(ctx context.Context) (cliformat.RangesView, error)
	// Events are the cluster's recent events (local: this node's only),
	// at most limit of them (0: the default).
	Events(ctx context.Context, local bool, limit int) (cliformat.EventsView, error)
	// Autoscale is the autoscaler's state, as JSON.
	Autoscale(ctx context.Context) (json.RawMessage, error)
	// Settings applies set (an empty value clears a setting) and returns
	// the settings that are overridden.
	Settings(ctx context.Context, set ...Setting) ([]Setting, error)
	// Readiness judges whether the cluster is fully replicated.
	Readiness(ctx context.Context) (Readiness, error)
}

// Setting is one cluster setting.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Readiness is Admin's judgement behind /ready.
type Readiness struct {
	Ready                                bool
	Reason                               string
	ReplicationFactor, LiveNodes, Ranges uint32
}

// Public is the "role" of the endpoints a secure node serves without
// credentials: /health, /ready and /metrics (what orchestrators and
// Prometheus poll, and none of them carries user data), the dashboard's
// script and stylesheet, and the login page.
const Public = security.RoleNone

// Route is one pattern of a node's HTTP mux and the role a request needs
// on a secure node: the role of the endpoint's gRPC twin.
type Route struct {
	Pattern string
	Role    security.Role
}

// Request bounds. The endpoints that read a body (the login form,
// settings, /debug/pprof/symbol) read a short one: a body beyond
// MaxBodyBytes is cut there and its connection closed after the reply;
// headers beyond MaxHeaderBytes get 431; a request must arrive within
// readTimeout, its header within readHeaderTimeout.
const (
	MaxBodyBytes      = 64 << 10
	MaxHeaderBytes    = 64 << 10
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
)

// NewServer is the node's HTTP server over every endpoint (docs/security.md
// lists them with their roles), held to the request bounds, and the routes
// it registered. The caller sets TLSConfig on a secure node and serves.
func NewServer(n Node) (*http.Server, []Route) {
	h, routes := Handler(n)
	return &http.Server{Handler: http.MaxBytesHandler(h, MaxBodyBytes),
		ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, MaxHeaderBytes: MaxHeaderBytes}, routes
}

// Handler is every endpoint of the node's HTTP port, without the bounds,
// and the routes it registered.
func Handler(n Node) (http.Handler, []Route) {
	m := &mux{mux: http.NewServeMux(), auth: n.Auth}
	m.handle("GET /metrics", Public, n.Metrics)
	m.handleFunc("GET /health", Public, func(w http.ResponseWriter, r *http.Request) {
		if !n.Serving() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	m.handleFunc("GET /ready", Public, n.serveReady)
	n.registerAPI(m)
	if n.Pprof {
		// Profiling, for finding where time goes (see docs/benchmarks.md).
		// Admin only: a heap profile shows memory contents, and anyone
		// could otherwise keep the CPU busy profiling.
		m.handleFunc("/debug/pprof/", security.RoleAdmin, pprof.Index)
		m.handleFunc("/debug/pprof/profile", security.RoleAdmin, pprof.Profile)
		m.handleFunc("/debug/pprof/symbol", security.RoleAdmin, pprof.Symbol)
		m.handleFunc("/debug/pprof/trace", security.RoleAdmin, pprof.Trace)
	}
	if n.Faults != nil {
		m.handle("/debug/faults", security.RoleAdmin, n.Faults)
		m.handle("/debug/faults/", security.RoleAdmin, n.Faults)
	}
	registerDashboard(m)
	return m.mux, m.routes
}

// mux registers a node's HTTP endpoints, each with the role it needs, and
// records the rules: nothing is registered without one, and the security
// test walks the record to try every endpoint.
type mux struct {
	mux    *http.ServeMux
	auth   *security.HTTPAuth // nil on an insecure node: no one is asked
	routes []Route
}

// handle serves h on pattern to requests that hold role need.
func (m *mux) handle(pattern string, need security.Role, h http.Handler) {
	m.guard(pattern, need, h, nil)
}

// guard is handle with a custom answer to requests without credentials.
func (m *mux) guard(pattern string, need security.Role, h, unauthenticated http.Handler) {
	m.routes = append(m.routes, Route{pattern, need})
	if m.auth != nil && need != Public {
		h = m.auth.Require(need, pattern, h, unauthenticated)
	}
	m.mux.Handle(pattern, h)
}

func (m *mux) handleFunc(pattern string, need security.Role, h http.HandlerFunc) {
	m.handle(pattern, need, h)
}
