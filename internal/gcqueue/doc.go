// Package gcqueue owns a node's MVCC GC queue and the cluster's protected
// timestamps (docs/backup.md, "Protected timestamp"). Each round
// (Queue.Round) looks at the ranges the node leads whose policy interval
// has passed, counts their versions, and collects those worth it below a
// safe point: the range's retention before the node's clock, held lower
// by any protected timestamp not yet expired. It then sweeps the range's
// abandoned intents. internal/queue decides when a range is due and worth
// it; this package does the I/O.
//
// Protected timestamps are records in the meta range that keep every
// version a read at their timestamp can see, cluster-wide, until released
// or expired; a backup holds one at its cut while it reads.
// Queue.ProtectTimestamp creates, renews, releases and lists them on the
// meta leaseholder (here or forwarded, internal/adminroute); a GC round
// reads them through it once, when it first needs them.
//
// The node is reached through Node, which the package owns: its Raft log
// version, replicas, clocks (the store's time, the HLC and its commit
// wait), the GC policy of a range by its key space, the intent sweep, the
// protected timestamp records on its engine and the event log. It builds
// on internal/raftstore, internal/queue and internal/adminroute; its
// refusals of bad input are api/kverr's. It imports no server or SDK code
// (internal/server, client) (internal/lint).
package gcqueue
