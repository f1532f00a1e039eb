// Package placement decides where replicas and leases belong. Its functions
// are pure: they take a snapshot of cluster state and return values (for now
// the imbalance indices operators read in `tidekv ctl status`); they never
// do I/O, sleep or read the clock.
//
// It imports the API types and internal/units, and it
// imports no I/O package (net, os, os/exec, net/http) (internal/lint).
package placement
