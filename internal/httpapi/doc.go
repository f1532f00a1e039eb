// Package httpapi owns a node's HTTP port: the table of routes with the
// role each needs on a secure node (Route, recorded so that the security
// test can try every one), the dashboard's JSON API (/api/...), /health,
// /ready and /metrics, /debug/pprof (when enabled) and the mount point of
// fault injection, the dashboard's page with its login and logout, and
// the bounds every request is held to (NewServer).
//
// It serves a Node: a few values and an Admin, a typed Go API the node
// implements over its own admin operations (no protobuf here). Whatever
// may change after the port opens (the node's ID, whether it serves) is a
// function read per request. The package decides nothing about the
// cluster: it translates HTTP to Admin calls and the answers to JSON.
//
// Imports: the standard library, internal/security (who a request is, the
// roles), internal/dashboard (the page and its assets) and
// internal/cliformat (the JSON views ctl shares). Nothing of the server,
// and no gRPC or protobuf package directly (security and cliformat use
// them for their other callers).
package httpapi
