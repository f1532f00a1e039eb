// Package metarange owns the admin calls the meta range's leaseholder
// answers from the replicated directory and its in-memory table
// (internal/meta): the range directory (Ranges), a node's join (Join:
// refused, JoinRefused, to a binary older than the cluster's log
// version), a node's heartbeat (Heartbeat: its record updated if it
// moved, the log version raised when every node allows it, the cluster's
// migration rate and gc-ttl in the answer), a leaseholder's range report
// (ReportRange: the directory updated only by a newer generation), the
// cluster status (Status), readiness (Readiness: every range at its
// replication factor on live nodes), a node's decommission
// (Decommission: its record marked draining or not) and the key spaces'
// records (CreateKeySpace, ListKeySpaces, and PublishKeySpaces for a
// restore's staged ones) and the cluster settings (Settings: all or none
// of a change). Each runs on the local meta replica, which the caller
// found holding the lease (internal/adminroute), and reads under a lease
// read.
//
// The node is reached through Node, which the package owns: its IDs, its
// engine (where the meta range's directory is read), the meta table, the
// cluster's log version, its copy of the key space catalogue, the
// cluster settings it reports (and its base configuration they apply
// to), the control loop's
// migration rate and wake-up, the node statuses and the event log. It
// imports no server, SDK or network code (internal/server, client,
// internal/transport, net, net/http) (internal/lint).
package metarange
