// Package retry owns TideKV's one back-off rule: how long to wait after
// the n-th failure in a row, for control actions (internal/control's
// scaler), replica work waiting out a volatile state (internal/raftstore)
// and the server's transaction retries alike. It is a pure decision: the
// caller waits.
//
// It imports no I/O package (net, os, os/exec, net/http) (internal/lint).
package retry
