// Package raftstore owns a node's replicas: one Raft group per range, driven
// through etcd raft's RawNode by a single per-node scheduler that ticks every
// replica, persists Raft state for all ready replicas in one synced batch
// (group commit), sends messages, applies committed commands and serves
// linearizable reads under the leader lease. It also owns splits and
// finding split keys (by data size, or from sampled request keys), replica
// changes (learner, snapshot, joint-consensus promotion) and adaptive
// learners (read replicas that are never promoted), snapshots shipped as
// SST files under a store-wide bandwidth cap, and replica destruction, and
// each range's data layout (unversioned, or versioned through internal/mvcc
// from log version 4, layout.go).
//
// It may import api/tidekvpb, api/hlc, internal/keys, internal/mvcc,
// internal/storage, internal/retry and the raft library. It does no
// networking itself: messages leave through the Transport interface it
// defines. It imports no control, server or network code
// (internal/control, internal/server, internal/transport, internal/gossip)
// (internal/lint).
package raftstore
