// Package dashboard owns the operator dashboard's static assets (an HTML
// page, its JavaScript and its stylesheet, embedded into the binary, and a
// secure node's login page) and the handlers that serve them.
//
// The page is a client of the node's JSON API (/api/status, /api/ranges,
// /api/events, /api/series, /api/autoscale, /api/whoami and, for admins,
// /api/settings), which the node implements and mounts next to Page; the
// endpoints and their shapes are documented in
// docs/dashboard.md. The assets load nothing from outside the serving node:
// no CDNs, fonts or frameworks, and charts are drawn by the page's own code.
//
// The package imports only the standard library.
package dashboard
