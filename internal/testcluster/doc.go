// Package testcluster runs real multi-process TideKV clusters for
// end-to-end tests: it builds the tidekv binary once per test binary,
// picks free ports, starts nodes through internal/launcher, and lets a test
// kill, stop and restart them while it talks to the cluster over the
// network. When a test fails it logs the tail of every node's log.
//
// With TIDEKV_E2E_SECURE=1 it runs every cluster secure: Main makes a CA, a
// node certificate, root's client certificate and a users file once per
// test binary (with the binary's own `cert` and `user` commands), Start
// gives them to every node, and ClientTLS, CLIArgs, HTTPClient, HTTPURL,
// BrowserTrust and BrowserLogin give clients what they need to reach the nodes; the
// tests ask those helpers rather than branching on the mode.
//
// It may import internal/launcher and the standard library (including
// testing); it must not import the server's own packages, so that tests
// exercise only the binary and its public interfaces. Unix only.
package testcluster
