package raftstore

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
)

// Merges. User data lives in one key space shared by all ranges, so a merge
// moves no data: the left range L extends its end key over its right
// neighbour R, and R's Raft group goes away. What must hold is that every
// replica of L, when it applies the merge, has R's data complete on its
// node. The merge therefore happens in two steps:
//
//  1. Freeze R (a Raft command on R): from then on R refuses writes,
//     splits and replica changes, so its data is final. The freeze is
//     applied in a synced batch, so a replica that applied it keeps it
//     across a crash. The coordinator waits until every replica of R has
//     applied the freeze.
//  2. Merge (a Raft command on L carrying R's frozen descriptor). It is
//     refused, identically on every replica, unless L's replicas are on
//     exactly R's nodes, all voters. Each replica of L then finds R's frozen
//     replica on its own node, takes R's span and destroys R's replica,
//     keeping the data.
//
// If the merge is refused, the coordinator unfreezes R. If the coordinator
// dies in between, R stays frozen (its descriptor says so) and the placement
// controller runs the merge again, which either completes or unfreezes.

// RangeFrozenError says the range is frozen for a merge: the request did
// nothing and can be retried once the merge is done.
type RangeFrozenError struct {
	RangeID, Into uint64
}

func (e *RangeFrozenError) Error() string {
	return fmt.Sprintf("range %d is being merged into range %d: retry", e.RangeID, e.Into)
}

// frozenErrLocked returns the refusal for a frozen range, or nil.
func (r *Replica) frozenErrLocked() error {
	if into := r.mu.state.GetDesc().GetMergingInto(); into != 0 {
		return &RangeFrozenError{RangeID: r.rangeID, Into: into}
	}
	return nil
}

// Freeze freezes this range for a merge into range into and returns the
// frozen descriptor. Freezing a range already frozen into the same range
// succeeds at once.
func (r *Replica) Freeze(ctx context.Context, into uint64) (*tidekvpb.RangeDescriptor, error) {
	// Under the admin lock no replica change of this range is in flight
	// from this node; one proposed elsewhere is refused at apply.
	r.store.adminMu(r.rangeID).Lock()
	defer r.store.adminMu(r.rangeID).Unlock()
	if !r.isLeader.Load() {
		return nil, r.notLeader()
	}
	d := r.desc.Load()
	switch {
	case r.rangeID == keys.MetaRangeID || into == 0 || into == r.rangeID:
		return nil, fmt.Errorf("%w: range %d cannot be merged into range %d", ErrInvalidRequest, r.rangeID, into)
	case d.GetMergingInto() == into:
		return d, nil
	case !allVoters(d):
		return nil, fmt.Errorf("%w: range %d has learners or a change in progress: %s", ErrInvalidRequest, r.rangeID, FormatReplicas(d))
	}
	res, err := r.propose(ctx, &tidekvpb.RaftCommand{FreezeInto: into}, nil)
	if err != nil {
		return nil, err
	}
	return res.newDesc, nil
}

// Unfreeze undoes a freeze whose merge did not happen. The caller must know
// the merge was refused or never proposed.
func (r *Replica) Unfreeze(ctx context.Context) (*tidekvpb.RangeDescriptor, error) {
	r.store.adminMu(r.rangeID).Lock()
	defer r.store.adminMu(r.rangeID).Unlock()
	if !r.isLeader.Load() {
		return nil, r.notLeader()
	}
	if r.desc.Load().GetMergingInto() == 0 {
		return r.desc.Load(), nil
	}
	res, err := r.propose(ctx, &tidekvpb.RaftCommand{Unfreeze: true}, nil)
	if err != nil {
		return nil, err
	}
	return res.newDesc, nil
}

// Merge absorbs the frozen right neighbour rhs into this range.
func (r *Replica) Merge(ctx context.Context, rhs *tidekvpb.RangeDescriptor) (*tidekvpb.RangeDescriptor, error) {
	r.store.adminMu(r.rangeID).Lock()
	defer r.store.adminMu(r.rangeID).Unlock()
	res, err := r.propose(ctx, &tidekvpb.RaftCommand{Merge: &tidekvpb.MergeCommand{Rhs: rhs}}, nil)
	if err != nil {
		return nil, err
	}
	return res.newDesc, nil
}

func allVoters(d *tidekvpb.RangeDescriptor) bool {
	for _, rd := range d.GetReplicas() {
		if rd.GetType() != tidekvpb.ReplicaType_VOTER {
			return false
		}
	}
	return true
}

// sameNodes: both descriptors list only voters, on the same nodes.
func sameNodes(a, b *tidekvpb.RangeDescriptor) bool {
	if len(a.GetReplicas()) != len(b.GetReplicas()) || !allVoters(a) || !allVoters(b) {
		return false
	}
	nodes := map[uint64]bool{}
	for _, rd := range a.GetReplicas() {
		nodes[rd.GetNodeId()] = true
	}
	for _, rd := range b.GetReplicas() {
		if !nodes[rd.GetNodeId()] {
			return false
		}
	}
	return true
}

// applyFreezeLocked marks the range frozen; the batch holding it is synced
// (see the comment at the top).
func (r *Replica) applyFreezeLocked(ab *applyBatch, into uint64) (applyResult, []func()) {
	d := r.mu.state.GetDesc()
	switch cur := d.GetMergingInto(); {
	case cur == into:
		return applyResult{newDesc: d}, nil
	case cur != 0:
		return applyResult{err: &RangeFrozenError{RangeID: r.rangeID, Into: cur}}, nil
	}
	nd := proto.Clone(d).(*tidekvpb.RangeDescriptor)
	nd.MergingInto = into
	nd.Generation++
	r.setDescLocked(nd)
	ab.sync = true
	log.Printf("range %d: frozen for a merge into range %d", r.rangeID, into)
	return applyResult{newDesc: nd}, r.reportLocked(nd)
}

func (r *Replica) applyUnfreezeLocked() (applyResult, []func()) {
	d := r.mu.state.GetDesc()
	if d.GetMergingInto() == 0 {
		return applyResult{newDesc: d}, nil
	}
	nd := proto.Clone(d).(*tidekvpb.RangeDescriptor)
	nd.MergingInto = 0
	nd.Generation++
	r.setDescLocked(nd)
	log.Printf("range %d: unfrozen, the merge did not happen", r.rangeID)
	return applyResult{newDesc: nd}, r.reportLocked(nd)
}

// applyMergeLocked takes over the frozen right neighbour's span. Whether it
// is refused depends only on this range's state and the command, so every
// replica decides the same.
func (r *Replica) applyMergeLocked(mc *tidekvpb.MergeCommand) (applyResult, []func()) {
	d, rhs := r.mu.state.GetDesc(), mc.GetRhs()
	refuse := func(why string) (applyResult, []func()) {
		return applyResult{err: fmt.Errorf("%w: merge of range %d into %d refused: %s", ErrInvalidRequest, rhs.GetRangeId(), r.rangeID, why)}, nil
	}
	switch {
	case r.rangeID == keys.MetaRangeID:
		return refuse("the meta range does not merge")
	case d.GetMergingInto() != 0:
		return refuse("this range is itself frozen")
	case len(d.GetEndKey()) == 0 || !bytes.Equal(d.GetEndKey(), rhs.GetStartKey()):
		return refuse("not adjacent")
	case rhs.GetMergingInto() != r.rangeID:
		return refuse("the right range is not frozen into this one")
	case !sameNodes(d, rhs):
		return refuse(fmt.Sprintf("replicas differ: %s vs %s", FormatReplicas(d), FormatReplicas(rhs)))
	}
	// The coordinator saw every replica of the right range apply its
	// freeze (durably) before proposing, and the replica sets are equal:
	// this node holds it, frozen. Anything else means its data may be
	// incomplete here, and taking the span would silently diverge.
	local := r.store.GetReplica(rhs.GetRangeId())
	if local == nil || local.desc.Load().GetMergingInto() != r.rangeID {
		log.Fatalf("range %d: merge of range %d: the local replica of range %d is missing or not frozen (%v); refusing to take over its span",
			r.rangeID, rhs.GetRangeId(), rhs.GetRangeId(), local.Desc())
	}
	// Both halves' data must be in one layout. The right one is frozen, so
	// its layout is final and the same on every replica of it.
	if local.VersionedLayout() != isMVCC(r.mu.state) {
		return refuse("the ranges' data layouts differ; the merge can run once both have moved to the versioned layout")
	}
	// Reads below either half's threshold may miss versions: the merged
	// range keeps the higher one (the frozen right one is final).
	r.raiseGCThresholdLocked(local.GCThreshold())
	r.mu.versionBound = r.mu.versionBound.merged(local.publishedVersionBound())
	if local.mayHoldIntents.Load() {
		r.setMayHoldIntentsLocked()
	}
	if local.lost.Load() {
		r.lost.Store(true) // it takes over the right half's lost data
	}
	// The reads the right range served are in its leaseholder's timestamp
	// cache, not in ours: stamp every later write above all of them. A
	// read at T moved its node's clock to T, at most the max offset ahead
	// of that node's physical clock, itself at most the max offset ahead of
	// ours; and a frozen range serves no read (checkRead), so none came
	// after this merge was proposed (every replica of it had applied the
	// freeze). Writes early after a merge may then wait out their
	// timestamp (commitWait).
	mergeLow := r.store.hlc.Now()
	mergeLow.WallTime += int64(2 * r.store.cfg.MaxClockOffset)
	r.order.leaseStart(mergeLow)
	nd := proto.Clone(d).(*tidekvpb.RangeDescriptor)
	nd.EndKey = append([]byte(nil), rhs.GetEndKey()...)
	nd.Generation = max(d.GetGeneration(), rhs.GetGeneration()) + 1
	r.setDescLocked(nd)
	log.Printf("range %d: merged range %d: now [%q, %q)", r.rangeID, rhs.GetRangeId(), nd.GetStartKey(), nd.GetEndKey())
	s := r.store
	post := []func(){func() {
		local.mu.Lock()
		local.failMergedLocked()
		s.destroyReplicaLocked(local, fmt.Sprintf("merged into range %d", r.rangeID))
		local.mu.Unlock()
	}}
	return applyResult{newDesc: nd}, append(post, r.reportLocked(nd)...)
}

// reportLocked tells the listener about a new descriptor when this replica
// leads (post step).
func (r *Replica) reportLocked(d *tidekvpb.RangeDescriptor) []func() {
	if r.isLeader.Load() && r.store.listener != nil {
		l := r.store.listener
		return []func(){func() { l.DescriptorChanged(d) }}
	}
	return nil
}

// dropMergedInto destroys local replicas frozen into the range of desc and
// covered by it: a replica of that range that missed the merge entry (its
// log was truncated) learns of the merge from a snapshot, which carries the
// merged span. It runs only once that snapshot is applied: until then it
// may fail to arrive or be refused, and the replica may yet apply the
// merge entry, which needs the frozen replica (applyMergeLocked).
func (s *Store) dropMergedInto(desc *tidekvpb.RangeDescriptor) {
	s.mu.RLock()
	var victims []*Replica
	for _, o := range s.mu.replicas {
		od := o.desc.Load()
		if od != nil && od.GetMergingInto() == desc.GetRangeId() &&
			keys.Overlaps(od.GetStartKey(), od.GetEndKey(), desc.GetStartKey(), desc.GetEndKey()) {
			victims = append(victims, o)
		}
	}
	s.mu.RUnlock()
	for _, v := range victims {
		v.mu.Lock()
		v.failMergedLocked()
		s.destroyReplicaLocked(v, fmt.Sprintf("merged into range %d (learnt from a snapshot)", desc.GetRangeId()))
		v.mu.Unlock()
	}
}

// failMergedLocked ends what is pending on a replica merged away: nothing
// proposed on a frozen range applies (every replica applied the freeze
// before the merge was proposed), so its writes can go to the merged range
// (RangeNotFound), unlike those of a replica merely removed from its range,
// which the others may still apply (destroyReplicaLocked).
func (r *Replica) failMergedLocked() {
	gone := &RangeNotFoundError{RangeID: r.rangeID}
	r.failPendingLocked(gone, gone)
}
