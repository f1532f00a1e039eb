// Package faultinject owns a node's fault-injection controls for chaos
// tests (Config.FaultInjection, --enable-fault-injection): a partition of
// its Raft traffic, an offset of the wall clock its closed timestamps
// read, and a disk that can be slowed or made to fail (Controls), and the
// HTTP handler that sets them, served to loopback callers only
// (Controls.Handler, mounted by internal/httpapi at /debug/faults).
//
// It imports the standard library, internal/transport (the
// partition), internal/raftstore (the skewed clock) and internal/storage
// (the disk faults); nothing of the server.
package faultinject
