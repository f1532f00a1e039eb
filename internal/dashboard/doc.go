// Package dashboard owns the operator dashboard's static assets (an HTML
// page, its JavaScript and its stylesheet, embedded into the binary) and the
// http.Handler that serves them.
//
// The page is a client of the node's JSON API (/api/status, /api/ranges,
// /api/events, /api/series), which the node implements and mounts next to
// Handler; the endpoints and their shapes are documented in
// docs/dashboard.md. The assets load nothing from outside the serving node:
// no CDNs, fonts or frameworks, and charts are drawn by the page's own code.
//
// The package imports only the standard library.
package dashboard
