// Package routed is a storage.Engine made of several engines, each owning
// fixed spans of the key space: the node's one engine as raftstore sees it,
// with a memory key space's data in an internal/memengine and everything
// else (Raft state, other ranges) in Pebble (docs/keyspaces.md, "Engines").
//
// Parts may be added inside the routable spans given to New only; keys
// elsewhere are the base's for good and are read and written there with no
// look-up. Reads go to the engine owning the key; an iterator, snapshot,
// SST or size over spans of several engines joins their parts in key
// order. A batch is split at commit between the engines it touches; while it commits, no
// snapshot or iterator across engines is taken, so readers see it whole. A
// crash between the parts is no concern of ours: the memory parts are lost
// on any crash anyway, and the Raft state in the base engine then says
// their data is gone (raftstore repairs such replicas, volatile.go).
//
// Routes are added while the engine runs (a key space created after the
// node started): AddPart moves what the base engine already holds in the
// new spans into the part, under a lock that waits for the reads and
// commits in flight. ReopenPart attaches a part after a restart, when its
// contents are gone.
//
// It imports nothing under api/ or internal/ but internal/storage itself (internal/lint).
package routed
