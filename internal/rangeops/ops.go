package rangeops

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/cliformat"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Node is the node as its range operations see it.
type Node interface {
	// ID is this node's ID.
	ID() uint64
	// Replica is the local replica of range id, nil if none.
	Replica(id uint64) *raftstore.Replica
	// LookupKey is the local replica covering key, nil if none.
	LookupKey(key []byte) *raftstore.Replica
	// Addr is node id's gRPC address, if the directory knows it; IsMember
	// whether it is a member of the cluster.
	Addr(id uint64) (string, bool)
	IsMember(id uint64) bool
	// Directory is the range directory, from the meta leaseholder.
	Directory(ctx context.Context) (*tidekvpb.RangesResponse, error)
	// AllocRangeID takes a new range ID from the meta range.
	AllocRangeID(ctx context.Context) (uint64, error)
	// CheckKey refuses a key the node does not take.
	CheckKey(key []byte) error
	// Learn makes sure the node knows the replication factor of the key
	// space holding key.
	Learn(ctx context.Context, key []byte)
	// ClockUntrusted is why node takes no leases (its clock is not
	// trusted), nil if it may.
	ClockUntrusted(node uint64) error
	// SplitBytes is the size at which a range splits.
	SplitBytes() uint64
	// Record adds an event to the node's log.
	Record(kind, subject, reasonFormat string, args ...any)
}

// Ops runs range operations through the node's admin routing.
type Ops struct {
	Node  Node
	Route *adminroute.Router
}

// reasonOr names the reason an admin call gave, or says an operator asked.
func reasonOr(reason string) string {
	if reason == "" {
		return "requested by an operator"
	}
	return reason
}

// Split splits a range at a key, or by size or load.
func (o Ops) Split(ctx context.Context, req *tidekvpb.SplitRequest) (*tidekvpb.SplitResponse, error) {
	key, rangeID := req.GetSplitKey(), req.GetRangeId()
	switch {
	case len(key) > 0:
		if err := o.Node.CheckKey(key); err != nil {
			return nil, err
		}
		if rangeID == 0 {
			var err error
			if rangeID, err = o.rangeIDForKey(ctx, key); err != nil {
				return nil, err
			}
		}
	case rangeID == 0:
		return nil, kverr.Invalid("split: give a split key or a range ID")
	}
	return adminroute.Range(ctx, o.Route, rangeID, func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.SplitResponse, error) {
		if want, gen := req.GetExpectedGeneration(), r.Desc().GetGeneration(); want != 0 && want != gen {
			return nil, &ChangedError{RangeID: rangeID, Decided: want, Now: gen}
		}
		splitKeys := [][]byte{key}
		if len(key) == 0 {
			var err error
			if splitKeys, err = o.splitKeysFor(ctx, r, req.GetByLoad()); err != nil {
				return nil, err
			}
		}
		// From the right, so that every split cuts the range r still leads.
		var resp *tidekvpb.SplitResponse
		for i := len(splitKeys) - 1; i >= 0; i-- {
			var err error
			if resp, err = o.splitAt(ctx, r, splitKeys[i], req.GetReason()); err != nil {
				return nil, err
			}
		}
		return resp, nil
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.SplitResponse, error) {
		return c.Split(ctx, req)
	})
}

// splitAt splits the range the leaseholder r leads at key.
func (o Ops) splitAt(ctx context.Context, r *raftstore.Replica, key []byte, reason string) (*tidekvpb.SplitResponse, error) {
	d := r.Desc()
	if bytes.Equal(d.GetStartKey(), key) {
		return nil, kverr.Invalid("key %q is already the start of range %d", key, d.GetRangeId())
	}
	if !keys.Contains(d.GetStartKey(), d.GetEndKey(), key) {
		return nil, &raftstore.KeyMismatchError{Key: key, Desc: d}
	}
	newID, err := o.Node.AllocRangeID(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := r.Split(ctx, key, newID)
	if err == nil {
		o.Node.Record("split", events.RangeSubject(d.GetRangeId()), "split at %s into ranges %d and %d: %s",
			cliformat.Quote(key), d.GetRangeId(), newID, reasonOr(reason))
	}
	return resp, err
}

// splitKeysFor picks where the leaseholder r splits its range: the median
// of its sampled requests, or by size the key that halves its data, or the
// keys that cut it into pieces no larger than its split line if halves
// would still be above it (raftstore.SizeSplitKeys).
func (o Ops) splitKeysFor(ctx context.Context, r *raftstore.Replica, byLoad bool) ([][]byte, error) {
	if !byLoad {
		return r.SizeSplitKeys(ctx, o.Node.SplitBytes())
	}
	key, hot, ok := r.LoadSplitKey()
	if !ok {
		return nil, fmt.Errorf("%w: range %d: no load split key (too few sampled requests, or %.0f%% on one key)", raftstore.ErrInvalidRequest, r.RangeID(), 100*hot)
	}
	return [][]byte{key}, nil
}

// rangeIDForKey finds the range covering key, locally or in the directory.
func (o Ops) rangeIDForKey(ctx context.Context, key []byte) (uint64, error) {
	if r := o.Node.LookupKey(key); r != nil {
		return r.RangeID(), nil
	}
	resp, err := o.Node.Directory(ctx)
	if err != nil {
		return 0, err
	}
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		if d.GetRangeId() != keys.MetaRangeID && keys.Contains(d.GetStartKey(), d.GetEndKey(), key) {
			return d.GetRangeId(), nil
		}
	}
	return 0, &raftstore.RangeNotFoundError{Key: key}
}

// ChangeReplicas adds or removes a range's replica, or moves one.
func (o Ops) ChangeReplicas(ctx context.Context, req *tidekvpb.ChangeReplicasRequest) (*tidekvpb.ChangeReplicasResponse, error) {
	if req.GetAddNodeId() == 0 && req.GetRemoveNodeId() == 0 {
		return nil, kverr.Invalid("change replicas: name a node to add or to remove")
	}
	if id := req.GetAddNodeId(); id != 0 {
		if !o.Node.IsMember(id) {
			return nil, kverr.Invalid("node %d is not a member of the cluster", id)
		}
	}
	return adminroute.Range(ctx, o.Route, req.GetRangeId(), func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.ChangeReplicasResponse, error) {
		var d *tidekvpb.RangeDescriptor
		var err error
		if req.GetLearner() {
			if req.GetRemoveNodeId() != 0 {
				return nil, kverr.Invalid("change replicas: a learner is added on its own, not with a removal")
			}
			d, err = r.AddLearner(ctx, req.GetAddNodeId())
		} else {
			o.Node.Learn(ctx, r.Desc().GetStartKey()) // its replication factor
			d, err = r.ChangeReplicas(ctx, req.GetAddNodeId(), req.GetRemoveNodeId())
		}
		if err != nil {
			return nil, err
		}
		o.recordReplicaChange(req)
		return &tidekvpb.ChangeReplicasResponse{Desc: d}, nil
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.ChangeReplicasResponse, error) {
		return c.ChangeReplicas(ctx, req)
	})
}

// TransferLease moves a range's lease to another node.
func (o Ops) TransferLease(ctx context.Context, req *tidekvpb.TransferLeaseRequest) (*tidekvpb.TransferLeaseResponse, error) {
	return adminroute.Range(ctx, o.Route, req.GetRangeId(), func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.TransferLeaseResponse, error) {
		if o.Node.ID() == req.GetTargetNodeId() {
			return &tidekvpb.TransferLeaseResponse{}, nil
		}
		if err := o.Node.ClockUntrusted(req.GetTargetNodeId()); err != nil {
			return nil, &RefusedError{Node: req.GetTargetNodeId(), Why: err}
		}
		if err := r.TransferLease(req.GetTargetNodeId()); err != nil {
			return nil, err
		}
		o.Node.Record("lease-transfer", events.RangeSubject(req.GetRangeId()), "lease moving from node %d to node %d: %s",
			o.Node.ID(), req.GetTargetNodeId(), reasonOr(req.GetReason()))
		return &tidekvpb.TransferLeaseResponse{}, nil
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.TransferLeaseResponse, error) {
		return c.TransferLease(ctx, req)
	})
}

func (o Ops) recordReplicaChange(req *tidekvpb.ChangeReplicasRequest) {
	subject, reason := events.RangeSubject(req.GetRangeId()), reasonOr(req.GetReason())
	switch add, rm := req.GetAddNodeId(), req.GetRemoveNodeId(); {
	case add != 0 && rm != 0:
		o.Node.Record("replica-move", subject, "replica moved from node %d to node %d: %s", rm, add, reason)
	case add != 0 && req.GetLearner():
		o.Node.Record("learner-add", subject, "read replica (learner) added on node %d: %s", add, reason)
	case add != 0:
		o.Node.Record("replica-add", subject, "replica added on node %d: %s", add, reason)
	default:
		o.Node.Record("replica-remove", subject, "replica removed from node %d: %s", rm, reason)
	}
}
