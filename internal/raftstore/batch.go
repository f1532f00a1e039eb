package raftstore

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Proposal batching: the writes and CAS commands a replica's queue holds
// when the scheduler drains it share one Raft entry (RaftCommand.batch),
// so a round of many concurrent requests costs Raft one entry to append,
// send, persist and apply instead of one per request. Each command in the
// batch is applied in order as its own entry would be and answers its own
// proposer; the entry is persisted and fsynced like any other before
// anyone is answered.

// maxBatchEntryBytes bounds one shared entry, well under MaxSizePerMsg's
// default, so a batch never needs an append message of its own.
const maxBatchEntryBytes = 256 << 10

// batchField is RaftCommand.batch's field number: a batch entry is built
// by appending each proposal's already-marshalled command as one element
// of that repeated field, with no second marshalling.
var batchField = (&tidekvpb.RaftCommand{}).ProtoReflect().Descriptor().Fields().ByName("batch").Number()

// batchable reports whether cmd may share an entry: only writes and CAS,
// whose effects depend on nothing but the data before them. Splits, merges,
// freezes and meta commands keep entries of their own.
func batchable(cmd *tidekvpb.RaftCommand) bool {
	return (len(cmd.GetWrites()) > 0 || cmd.GetCas() != nil) && cmd.GetSplit() == nil && cmd.GetMeta() == nil &&
		cmd.GetMerge() == nil && cmd.GetFreezeInto() == 0 && !cmd.GetUnfreeze()
}

// proposeAllLocked hands queued proposals to Raft in order, consecutive
// batchable ones in shared entries of at most maxBatchEntryBytes once the
// cluster's log version allows shared entries.
func (r *Replica) proposeAllLocked(props []*proposal) {
	share := r.store.logVersion.Load() >= LogVersionShared
	for i := 0; i < len(props); {
		j, size := i+1, len(props[i].data)
		for share && props[i].batchable && j < len(props) && props[j].batchable && size+len(props[j].data) <= maxBatchEntryBytes {
			size += len(props[j].data)
			j++
		}
		r.proposeLocked(props[i:j])
		i = j
	}
}

// proposeLocked proposes ps as one entry and settles what Raft refused.
func (r *Replica) proposeLocked(ps []*proposal) {
	raw := r.mu.raw
	var err error
	switch {
	case ps[0].cc != nil:
		err = raw.ProposeConfChange(proto.Clone(ps[0].cc).(*raftpb.ConfChangeV2))
	case len(ps) == 1:
		err = raw.Propose(ps[0].data)
	default:
		err = raw.Propose(batchData(ps))
	}
	if err == nil {
		r.store.stats.countProposed(len(ps))
	}
	for _, p := range ps {
		switch {
		case err == raft.ErrProposalDropped && raw.BasicStatus().RaftState != raft.StateLeader:
			p.finish(applyResult{err: r.notLeader()})
		case err == raft.ErrProposalDropped && raw.BasicStatus().LeadTransferee != 0:
			// Raft takes no proposals while it hands leadership over: the
			// request belongs with the node taking the lease. Not overload:
			// a client told "overloaded" may give up (the Redis front end
			// fails fast on it), while one told where the lease is going
			// follows it.
			p.finish(applyResult{err: &NotLeaderError{RangeID: r.rangeID, LeaderNodeID: r.mu.peerNodes[raw.BasicStatus().LeadTransferee], Desc: r.desc.Load()}})
		case err == raft.ErrProposalDropped:
			p.finish(applyResult{err: ErrOverloaded})
		case err != nil:
			p.finish(applyResult{err: err})
		case p.cc != nil:
			// Conf changes carry no proposal ID; the change loop polls.
			p.finish(applyResult{})
		default:
			r.mu.proposals[p.id] = p
		}
	}
}

// batchData encodes a RaftCommand whose batch holds the proposals'
// commands.
func batchData(ps []*proposal) []byte {
	n := 0
	for _, p := range ps {
		n += protowire.SizeTag(batchField) + protowire.SizeBytes(len(p.data))
	}
	b := make([]byte, 0, n)
	for _, p := range ps {
		b = protowire.AppendTag(b, batchField, protowire.BytesType)
		b = protowire.AppendBytes(b, p.data)
	}
	return b
}

// entryCommands returns the commands of a decoded entry: the batch's, or
// the entry's own command.
func entryCommands(cmd *tidekvpb.RaftCommand) []*tidekvpb.RaftCommand {
	if b := cmd.GetBatch(); len(b) > 0 {
		return b
	}
	return []*tidekvpb.RaftCommand{cmd}
}
