package raftstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
)

// Replica GC. A node that was down (or cut off) while a range moved away
// from it still holds its old replica when it comes back: the removal it
// missed can never reach it, since the range's current members no longer
// talk to it. The range directory in the meta range says who the members
// are, so a stale replica is recognised by comparing with it, and removed.
// A stale replica also blocks snapshots of the ranges that now own its
// span (a new member of a range split off from it, say), so a snapshot
// that overlaps local replicas checks them against the directory first.

// RangeDirectory is the cluster's authoritative list of range descriptors
// (the server reads it from the meta range). The store only asks it; it
// never writes.
type RangeDirectory interface {
	// RangeDescriptors returns every user range's descriptor as the meta
	// range has it.
	RangeDescriptors(ctx context.Context) ([]*tidekvpb.RangeDescriptor, error)
}

// SetRangeDirectory gives the store the directory it checks local replicas
// against (nil: none, overlapping snapshots are refused).
func (s *Store) SetRangeDirectory(d RangeDirectory) { s.directory.Store(&directoryRef{d}) }

type directoryRef struct{ RangeDirectory }

// directoryCheckTimeout bounds the directory read a snapshot waits for.
const directoryCheckTimeout = 3 * time.Second

// staleReason says why a local replica (descriptor local, replica ID id)
// on node is stale according to the directory, or "" if it is not or the
// directory cannot tell. Generations grow along a range's whole lineage
// (splits, merges, replica changes), which makes "newer" well defined:
//   - the directory has the range at a generation at least the local one,
//     without this node or with a newer replica of it (removed, maybe added
//     again: the new incarnation starts empty and gets a snapshot);
//   - the directory no longer has the range (merged away), and every
//     directory range newer than the local replica that overlaps its span
//     lacks this node or has no replica here yet. If one lists it and this
//     node holds a replica of it, that replica may have yet to apply the
//     merge, which needs this data. Unless that range is dir.incoming,
//     whose snapshot is arriving: the snapshot holds the merged state. (A
//     node down through a merge and then added to the merged range used to
//     refuse its snapshot for ever.)
//
// A range missing from the directory with nothing newer over its span is
// kept: it may be a split's new half the directory has not heard of yet.
func staleReason(local *tidekvpb.RangeDescriptor, id, node uint64, dir directory) string {
	if local == nil {
		return ""
	}
	if d := dir.byID[local.GetRangeId()]; d != nil {
		if local.GetGeneration() > d.GetGeneration() {
			return "" // the directory has not heard of the local change yet
		}
		switch rd := replicaOnNode(d, node); {
		case rd == nil:
			return fmt.Sprintf("the range directory (generation %d) no longer lists this node", d.GetGeneration())
		case rd.GetReplicaId() > id:
			return fmt.Sprintf("the range directory (generation %d) lists a newer replica %d here", d.GetGeneration(), rd.GetReplicaId())
		}
		return ""
	}
	var newer []string
	for _, d := range dir.all {
		if d.GetGeneration() <= local.GetGeneration() || !descsOverlap(d, local) {
			continue
		}
		if replicaOnNode(d, node) != nil && dir.held[d.GetRangeId()] && d.GetRangeId() != dir.incoming {
			return ""
		}
		newer = append(newer, fmt.Sprintf("range %d (generation %d)", d.GetRangeId(), d.GetGeneration()))
	}
	if len(newer) == 0 {
		return ""
	}
	return fmt.Sprintf("the range is gone from the directory and its span belongs to %s, of which this node holds no replica waiting to apply the merge", strings.Join(newer, ", "))
}

// Removed is one replica the GC destroyed, and why.
type Removed struct {
	RangeID, Generation uint64
	Reason              string
}

// RemoveStale destroys every local replica that the directory (every user
// range's descriptor) shows to be stale. Leaders and the meta range (not
// in the directory) are never touched.
func (s *Store) RemoveStale(all []*tidekvpb.RangeDescriptor) []Removed {
	dir := indexDirectory(all, s.heldRanges())
	var out []Removed
	for _, r := range s.Replicas() {
		if rm, ok := s.removeIfStale(r, dir); ok {
			delete(dir.held, rm.RangeID) // nothing waits on its merges now
			out = append(out, rm)
		}
	}
	return out
}

// directory is the range directory indexed by range ID, with what the
// node holds: the ranges it has initialized replicas of, and the range
// whose incoming snapshot asks (0 for the periodic GC).
type directory struct {
	all      []*tidekvpb.RangeDescriptor
	byID     map[uint64]*tidekvpb.RangeDescriptor
	held     map[uint64]bool
	incoming uint64
}

func indexDirectory(all []*tidekvpb.RangeDescriptor, held map[uint64]bool) directory {
	byID := make(map[uint64]*tidekvpb.RangeDescriptor, len(all))
	for _, d := range all {
		byID[d.GetRangeId()] = d
	}
	return directory{all: all, byID: byID, held: held}
}

// heldRanges returns the IDs of the ranges the node has initialized
// replicas of.
func (s *Store) heldRanges() map[uint64]bool {
	held := map[uint64]bool{}
	for _, r := range s.Replicas() {
		if r.desc.Load() != nil {
			held[r.rangeID] = true
		}
	}
	return held
}

func (s *Store) removeIfStale(r *Replica, dir directory) (Removed, bool) {
	if r.rangeID == keys.MetaRangeID {
		return Removed{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.destroyed || r.isLeader.Load() {
		return Removed{}, false
	}
	local := r.desc.Load()
	why := staleReason(local, r.mu.replicaID, s.nodeID, dir)
	if why == "" {
		return Removed{}, false
	}
	s.destroyReplicaLocked(r, why)
	s.stats.StaleReplicasRemoved.Add(1)
	return Removed{RangeID: r.rangeID, Generation: local.GetGeneration(), Reason: why}, true
}

// clearOverlapsFor makes room for a snapshot of desc: local replicas of
// other ranges that overlap its span are checked against the directory and
// destroyed if stale. It returns an error naming the first overlapping
// replica that must stay (or why the directory could not be asked); the
// snapshot is then refused, and the leader tries again later.
func (s *Store) clearOverlapsFor(desc *tidekvpb.RangeDescriptor) error {
	overlaps := s.overlapping(desc)
	if len(overlaps) == 0 {
		return nil
	}
	first := overlaps[0].desc.Load()
	src := s.directory.Load()
	if src == nil || src.RangeDirectory == nil {
		return fmt.Errorf("range %d: snapshot overlaps the local replica of range %d (generation %d)",
			desc.GetRangeId(), first.GetRangeId(), first.GetGeneration())
	}
	ctx, cancel := context.WithTimeout(context.Background(), directoryCheckTimeout)
	defer cancel()
	all, err := src.RangeDescriptors(ctx)
	if err != nil {
		return fmt.Errorf("range %d: snapshot overlaps the local replica of range %d, and the range directory could not be read to check it: %v",
			desc.GetRangeId(), first.GetRangeId(), err)
	}
	dir := indexDirectory(all, s.heldRanges())
	dir.incoming = desc.GetRangeId()
	for _, o := range overlaps {
		if rm, ok := s.removeIfStale(o, dir); ok {
			s.listenRemoved(rm)
			continue
		}
		od := o.desc.Load()
		return fmt.Errorf("range %d: snapshot overlaps the local replica of range %d (generation %d), which is still a member; it must first catch up",
			desc.GetRangeId(), od.GetRangeId(), od.GetGeneration())
	}
	return nil
}

// overlapping returns the initialized local replicas of other ranges that
// overlap d's span, leaving out those frozen into d's range: d's span
// reaches over them only once the merge has happened, so a snapshot of d
// holds their data, and they are destroyed when it is applied.
func (s *Store) overlapping(d *tidekvpb.RangeDescriptor) []*Replica {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*Replica
	for id, o := range s.mu.replicas {
		od := o.desc.Load()
		if id == d.GetRangeId() || od == nil || od.GetMergingInto() == d.GetRangeId() {
			continue
		}
		if descsOverlap(od, d) {
			out = append(out, o)
		}
	}
	return out
}

func (s *Store) listenRemoved(rm Removed) {
	if s.listener != nil {
		s.listener.ReplicaRemoved(rm)
	}
}
