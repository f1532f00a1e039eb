// Package launcher starts, watches and stops `tidekv server` processes on
// the local machine. It owns the conventions shared by `tidekv up`, the
// end-to-end test harness (internal/testcluster) and the elasticity
// controller's local actuator:
//
//   - the port layout of a local cluster (Ports, PortsPerNode, the Offset
//     constants): node i (1-based) owns the block of PortsPerNode ports that
//     starts at base+PortsPerNode*(i-1); a block FreeBasePort picks is
//     reserved for the picking process's life against every process that
//     picks here (lock files in the temporary directory);
//   - the on-disk layout: node i lives in <dir>/node<i> and its stderr and
//     stdout are appended to <datadir>/tidekv.log;
//   - how readiness is detected: the server's single stdout line
//     "tidekv: node <ID> ready grpc=<addr> http=<addr>" (ParseReadyLine)
//     confirmed by GET /health;
//   - how a process is stopped: SIGTERM, a grace period, then SIGKILL;
//   - how a sized node is run: in a cgroup of its own made by
//     internal/cgroup, entered right after start, removed after exit;
//   - how a node shares its quota with a co-runner (NodeSpec.Hog, node 1
//     of a Config with Hog): `tidekv hog` (Spin) in a cgroup inside the
//     node's, started with it and killed, its cgroup removed, when the
//     node exits;
//   - who bootstraps: a cluster is new when no node directory holds state;
//     then node 1 starts without --join and the others join through it.
//
// Process manages one server; Cluster manages the N nodes of a Config; Up is
// the foreground loop behind `tidekv up`.
//
// The package imports only the standard library and internal/cgroup (which
// imports only the standard library), so every layer (commands,
// tests, the controller) can use it without import cycles. It is Unix-only:
// it relies on process groups and signals.
package launcher
