// Package gossip owns cluster membership and failure detection: every TideKV
// node runs one Gossip instance, a member of a hashicorp/memberlist (SWIM)
// cluster, and the placement controller (on whichever node holds the meta
// range lease) reads the member list through the Membership interface.
//
// A member is named "tidekv-<NodeID>" in memberlist and carries its NodeID and
// gRPC address in its metadata. Members() reports each TideKV node this node
// has seen, with its state as this node sees it (Alive, Suspect, Dead, Left)
// and the time, by this node's clock, when it entered that state. Dead and
// Left members stay listed (memberlist itself forgets them after a while)
// until the same NodeID comes back, which makes it Alive again.
//
// What the package does not own: what a Dead member means. It only reports
// memberlist's verdict; placement applies its own grace period (using Since)
// before it moves replicas away, and treats Left like Dead without waiting.
// It never removes nodes from the cluster, touches ranges, or talks gRPC.
//
// Where memberlist has no hook, the package fills in (see gossip.go):
//   - Suspect: memberlist keeps suspicion internal (memberlist.Node.State is
//     never filled in), so a member turns Suspect here when this node's own
//     probe of it fails, read from memberlist's "Suspect ... has failed" log
//     line, and Alive again on its next successful probe. A member whose Dead
//     verdict arrives by gossip before this node probes it goes from Alive
//     straight to Dead.
//   - Left versus Dead: memberlist's leave notification does not say which, so
//     Leave first sends every member a direct "leaving" note and only then
//     broadcasts memberlist's leave.
//   - Restart at a new address: memberlist refuses a name at a new address
//     while the old one is alive or suspect, so the join loop keeps
//     re-joining until the cluster has accepted this node at its current
//     address; once the old incarnation is Dead the name is reclaimed at once.
//   - Partitions: memberlist never contacts members it has declared dead, so
//     Gossip re-joins seeds that are not live members every RejoinInterval.
//
// Gossip is plaintext unless Config.Keys is set; then every message and
// state exchange is encrypted and authenticated with AES-GCM by memberlist's
// keyring, and a member without an accepted key can neither join nor be
// heard.
//
// It imports only the standard library and github.com/hashicorp/memberlist;
// nothing in TideKV. Consumers depend on the Membership interface, which Fake
// implements for tests.
package gossip
