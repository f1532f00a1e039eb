// Package nemesis owns fault schedules for TideKV clusters and the chaos
// run that checks them: a seeded plan of faults (SIGKILL and restart,
// SIGSTOP pauses, and, through a node's fault-injection endpoint, network
// partitions of one node or of node subsets, clock skew and slow disks;
// and operations that meet them: replica moves and decommissions) is a
// value made by Plan without I/O; Run carries it out against a Target
// (real processes from the launcher, or a test cluster);
// Chaos starts a cluster of the real binary, runs a linearizability
// workload through it while a plan runs, and reports whether the history
// is linearizable and the cluster is back at its replication factor.
//
// `tidekv bench chaos` is its command; e2e tests use Plan and Run directly.
package nemesis
