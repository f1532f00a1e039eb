package server

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tidekv/tidekv/internal/dashboard"
	"github.com/tidekv/tidekv/internal/security"
)

// public is the "role" of the endpoints a secure node serves without
// credentials: /health, /ready and /metrics (what orchestrators and
// Prometheus poll, and none of them carries user data), the dashboard's
// script and stylesheet, and the login page.
const public = security.RoleNone

// httpRoute is one pattern of a node's HTTP mux and the role a request
// needs on a secure node: the role of the endpoint's gRPC twin.
type httpRoute struct {
	pattern string
	role    security.Role
}

// httpMux registers a node's HTTP endpoints, each with the role it needs,
// and records the rules (s.httpRoutes): nothing is registered without
// one, and the security test walks the record to try every endpoint.
type httpMux struct {
	mux    *http.ServeMux
	auth   *security.HTTPAuth // nil on an insecure node: no one is asked
	routes []httpRoute
}

// handle serves h on pattern to requests that hold role need.
func (m *httpMux) handle(pattern string, need security.Role, h http.Handler) {
	m.guard(pattern, need, h, nil)
}

// guard is handle with a custom answer to requests without credentials.
func (m *httpMux) guard(pattern string, need security.Role, h, unauthenticated http.Handler) {
	m.routes = append(m.routes, httpRoute{pattern, need})
	if m.auth != nil && need != public {
		h = m.auth.Require(need, pattern, h, unauthenticated)
	}
	m.mux.Handle(pattern, h)
}

func (m *httpMux) handleFunc(pattern string, need security.Role, h http.HandlerFunc) {
	m.handle(pattern, need, h)
}

// httpHandler is every endpoint of the node's HTTP port (docs/security.md
// lists them with their roles).
func (s *Server) httpHandler() http.Handler {
	m := &httpMux{mux: http.NewServeMux()}
	if s.sec != nil {
		m.auth = &s.sec.http
	}
	m.handle("GET /metrics", public, promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	m.handleFunc("GET /health", public, func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	m.handleFunc("GET /ready", public, s.serveReady)
	s.registerAPI(m)
	if s.cfg.EnablePprof {
		// Profiling, for finding where time goes (see docs/benchmarks.md).
		// Admin only: a heap profile shows memory contents, and anyone
		// could otherwise keep the CPU busy profiling.
		m.handleFunc("/debug/pprof/", security.RoleAdmin, pprof.Index)
		m.handleFunc("/debug/pprof/profile", security.RoleAdmin, pprof.Profile)
		m.handleFunc("/debug/pprof/symbol", security.RoleAdmin, pprof.Symbol)
		m.handleFunc("/debug/pprof/trace", security.RoleAdmin, pprof.Trace)
	}
	if s.faults != nil {
		m.handle("/debug/faults", security.RoleAdmin, s.faults)
		m.handle("/debug/faults/", security.RoleAdmin, s.faults)
	}
	s.registerDashboard(m)
	s.httpRoutes = m.routes
	return m.mux
}

// registerDashboard serves the dashboard's page and assets and, on a
// secure node, its login: the page sends a visitor without credentials to
// the login page, which opens a session (a cookie) for a user name and
// password of the users file.
func (s *Server) registerDashboard(m *httpMux) {
	m.handle("GET /static/", public, dashboard.Static())
	if m.auth == nil {
		m.handle("GET /{$}", security.RoleRead, dashboard.Page())
		return
	}
	toLogin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "login", http.StatusSeeOther)
	})
	m.guard("GET /{$}", security.RoleRead, dashboard.Page(), toLogin)
	m.handleFunc("GET /login", public, func(w http.ResponseWriter, r *http.Request) { dashboard.LoginPage(w, "") })
	m.handleFunc("POST /login", public, func(w http.ResponseWriter, r *http.Request) {
		c, err := m.auth.Login(r.PostFormValue("user"), r.PostFormValue("password"), r.RemoteAddr)
		if err != nil {
			dashboard.LoginPage(w, err.Error())
			return
		}
		http.SetCookie(w, c)
		http.Redirect(w, r, "./", http.StatusSeeOther)
	})
	m.handleFunc("POST /logout", public, func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, m.auth.Logout(r))
		http.Redirect(w, r, "login", http.StatusSeeOther)
	})
}
