package raftstore

import (
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// The leader lease lets the leaseholder answer linearizable reads from its
// own state without a Raft round trip or even a pass through the scheduler.
//
// With CheckQuorum, a follower that heard from the leader within an election
// timeout refuses to vote, and no follower campaigns before a full election
// timeout without hearing from the leader. So once a quorum of voters has
// acknowledged heartbeats the leader sent at time t, no other leader can
// exist before t + electionTimeout − one tick (a follower's first tick may
// come just after the heartbeat reset its count). The lease ends half an
// election timeout before that (Config.leaseDuration), leaving that half
// for clock-rate differences. Its times are readings of the
// leaseholder's monotonic clock (monoNow), so neither an offset from other
// nodes' clocks nor a step of its own wall clock can stretch it. It counts
// from the heartbeat's send time, never from when the answer arrived: an
// answer delayed in a queue or a paused process must not renew the lease.
// Heartbeats and their answers travel in order on one stream per node pair,
// so answers are matched with send times first in, first out; a lost
// message (the transport reports the peer unreachable) clears the queue,
// after which answers are ignored until new heartbeats go out. A leadership
// transfer voids the lease at once (the transferee campaigns without
// waiting, and the followers grant a transfer's votes in spite of their
// leases). If Raft gives the transfer up (the transferee has not won after
// an election timeout), the lease comes back only once the transferee has
// answered a heartbeat sent after the last MsgTimeoutNow: the message may
// be delayed for any time, and a transferee still in the term acts on it.
// Messages to a node go in order, so by that answer it has acted on the
// message (and left the term, so it answers nothing in it) or ignored it.
// Only transfers whose MsgTimeoutNow went out cost anything: most aborted
// ones never send it (the transferee did not catch up), and a transferee
// that did get it answers within a heartbeat; one unreachable keeps the
// leader on ReadIndex reads until it answers or the term ends.
//
// A lease read also needs the leader to have applied the first index
// committed in its term: everything earlier leaders acknowledged is at or
// below it, and everything since was acknowledged only after this leader
// applied it, so the current engine state includes it.

// refreshLeaseLocked recomputes the lease after the scheduler stepped
// messages or ticked.
func (r *Replica) refreshLeaseLocked() {
	bs := r.mu.raw.BasicStatus()
	if bs.RaftState != raft.StateLeader || bs.LeadTransferee != 0 || r.mu.state.GetDesc() == nil || r.lost.Load() ||
		r.timeoutNowPendingLocked(bs.GetTerm()) {
		r.leaseExpiry.Store(0)
		return
	}
	if r.mu.leaseTerm != bs.GetTerm() {
		// The first index committed in this term covers every write an
		// earlier leader acknowledged; later writes are acknowledged only
		// after this leader applied them, so the index stays fixed for the
		// term (tracking the live commit index would send reads to the
		// slow path whenever a write is between commit and apply).
		commit := bs.GetCommit()
		if t, err := r.mu.storage.Term(commit); err != nil || t != bs.GetTerm() {
			r.leaseExpiry.Store(0)
			return
		}
		r.mu.leaseTerm = bs.GetTerm()
		r.leaseIndex.Store(commit)
	}
	contact := r.quorumContactLocked(monoNow())
	if contact == 0 {
		r.leaseExpiry.Store(0)
		return
	}
	r.leaseExpiry.Store(int64(contact) + int64(r.store.cfg.leaseDuration()))
	if r.order.handedOff.Load() {
		// A transfer given up: its transferee can no longer win in this
		// term (timeoutNowPendingLocked), so reads are ours again.
		r.order.handedOff.Store(false)
	}
}

// quorumContactLocked returns the latest time by which a quorum of every
// voting configuration (both halves of a joint one) had answered us.
func (r *Replica) quorumContactLocked(now monoTime) monoTime {
	var incoming, outgoing []uint64
	for _, rd := range r.mu.state.GetDesc().GetReplicas() {
		switch rd.GetType() {
		case tidekvpb.ReplicaType_VOTER:
			incoming = append(incoming, rd.GetReplicaId())
			outgoing = append(outgoing, rd.GetReplicaId())
		case tidekvpb.ReplicaType_VOTER_INCOMING:
			incoming = append(incoming, rd.GetReplicaId())
		case tidekvpb.ReplicaType_VOTER_OUTGOING:
			outgoing = append(outgoing, rd.GetReplicaId())
		}
	}
	t := r.quorumTimeLocked(incoming, now)
	if len(outgoing) > 0 && len(outgoing) != len(incoming) || isJoint(r.mu.state.GetDesc()) {
		if o := r.quorumTimeLocked(outgoing, now); o < t {
			t = o
		}
	}
	return t
}

func (r *Replica) quorumTimeLocked(voters []uint64, now monoTime) monoTime {
	if len(voters) == 0 {
		return 0
	}
	var buf [7]monoTime // on the stack for up to 7 voters
	times := buf[:0]
	for _, id := range voters {
		if id == r.mu.replicaID {
			times = append(times, now)
		} else {
			times = append(times, r.mu.lastContact[id])
		}
	}
	slices.Sort(times)
	return times[len(times)-1-len(times)/2] // the quorum-th most recent answer
}

// leaseCovers reports whether a read arriving now may be served locally.
func (r *Replica) leaseCovers() bool {
	if !r.leaseValid() {
		return false
	}
	idx := r.leaseIndex.Load()
	return idx != 0 && r.applied.Load() >= idx
}

// leaseValid reports whether the lease holds now. It never does while the
// node's clock is untrusted (Store.SetClockTrusted): the lease itself is on
// the monotonic clock, but what a leaseholder serves under it will carry
// its timestamps.
func (r *Replica) leaseValid() bool {
	if r.store.clockUntrusted.Load() != nil {
		return false
	}
	exp := r.leaseExpiry.Load()
	return exp != 0 && int64(monoNow()) < exp
}

// maxHeartbeatsInFlight bounds the send times kept per peer; a peer that
// stops answering stops adding more.
const maxHeartbeatsInFlight = 64

func (r *Replica) heartbeatSentLocked(peer uint64, at monoTime) {
	if q := r.mu.heartbeatsSent[peer]; len(q) < maxHeartbeatsInFlight {
		r.mu.heartbeatsSent[peer] = append(q, at)
	}
}

// timeoutNowSentLocked notes a MsgTimeoutNow handed to the transport. The
// time is read after the send, so a heartbeat sent earlier has an earlier
// or equal one.
func (r *Replica) timeoutNowSentLocked(m *raftpb.Message) {
	if r.mu.timeoutNow == nil || r.mu.timeoutNowTerm != m.GetTerm() {
		r.mu.timeoutNow, r.mu.timeoutNowTerm = map[uint64]monoTime{}, m.GetTerm()
	}
	r.mu.timeoutNow[m.GetTo()] = monoNow()
}

// timeoutNowPendingLocked reports whether a MsgTimeoutNow this leader sent
// in term may still reach a transferee that has not answered a heartbeat
// sent after it, forgetting those that can no longer.
func (r *Replica) timeoutNowPendingLocked(term uint64) bool {
	if len(r.mu.timeoutNow) == 0 {
		return false
	}
	if r.mu.timeoutNowTerm != term {
		r.mu.timeoutNow = nil
		return false
	}
	for to, sent := range r.mu.timeoutNow {
		if r.mu.lastContact[to] <= sent {
			return true
		}
		delete(r.mu.timeoutNow, to)
	}
	return false
}

// ackHeartbeatLocked credits a peer with the send time of the oldest
// heartbeat it has not yet acknowledged. Answers from another term belong
// to another leadership and count for nothing.
func (r *Replica) ackHeartbeatLocked(m *raftpb.Message) {
	if m.GetTerm() != r.mu.raw.BasicStatus().GetTerm() {
		return
	}
	q := r.mu.heartbeatsSent[m.GetFrom()]
	if len(q) == 0 {
		return
	}
	r.mu.lastContact[m.GetFrom()] = q[0]
	r.mu.heartbeatsSent[m.GetFrom()] = q[1:]
}
