package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/placement"
)

// RunnerConfig limits how placement operators execute. Migration bandwidth
// itself is capped where the bytes flow: raftstore's snapshot sender.
type RunnerConfig struct {
	// MaxInFlight is the most operators running at once, cluster-wide.
	MaxInFlight int
	// MaxSnapshotsPerNode is the most data-moving operators (replica adds
	// and moves) at once that send data to the same node.
	MaxSnapshotsPerNode int
	// OpsPerMinute is the most operators started per minute, cluster-wide.
	OpsPerMinute int
	// Timeout bounds one operator (a replica move copies a whole range).
	Timeout time.Duration
}

// DefaultRunnerConfig suits a small cluster on one machine.
func DefaultRunnerConfig() RunnerConfig {
	return RunnerConfig{MaxInFlight: 8, MaxSnapshotsPerNode: 2, OpsPerMinute: 120, Timeout: 2 * time.Minute}
}

// Validate reports a limit that cannot work.
func (c RunnerConfig) Validate() error {
	if c.MaxInFlight < 1 || c.MaxSnapshotsPerNode < 1 || c.OpsPerMinute < 1 || c.Timeout <= 0 {
		return fmt.Errorf("server: runner limits must be positive: %+v", c)
	}
	return nil
}

// runner executes placement operators within RunnerConfig's limits. It is
// the only place placement decisions become side effects; an operator it
// cannot start now is dropped (the next placement round decides again).
type runner struct {
	s   *Server
	cfg RunnerConfig

	mu       sync.Mutex
	inflight map[uint64]placement.Operator // by range (a merge also under Other)
	toNode   map[uint64]int                // data-moving operators per target node
	starts   []time.Time                   // start times within the last minute
}

func newRunner(s *Server, cfg RunnerConfig) *runner {
	return &runner{s: s, cfg: cfg, inflight: map[uint64]placement.Operator{}, toNode: map[uint64]int{}}
}

// busy lists the ranges with an operator running, and the operators.
func (r *runner) busy() (map[uint64]bool, []placement.Operator) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[uint64]bool, len(r.inflight))
	var ops []placement.Operator
	for id, op := range r.inflight {
		out[id] = true
		if id == op.Range {
			ops = append(ops, op)
		}
	}
	return out, ops
}

func movesData(op placement.Operator) bool {
	switch op.Kind {
	case placement.OpAddVoter, placement.OpAddLearner, placement.OpMoveReplica:
		return true
	}
	return false
}

// start runs op in the background if the limits allow; it reports whether
// it did.
func (r *runner) start(op placement.Operator) bool {
	now := time.Now()
	r.mu.Lock()
	for len(r.starts) > 0 && now.Sub(r.starts[0]) > time.Minute {
		r.starts = r.starts[1:]
	}
	switch {
	case len(r.inflight) >= r.cfg.MaxInFlight, len(r.starts) >= r.cfg.OpsPerMinute:
		r.mu.Unlock()
		return false
	case r.has(op.Range, op.Other):
		r.mu.Unlock()
		return false
	case movesData(op) && r.toNode[op.Target] >= r.cfg.MaxSnapshotsPerNode:
		r.mu.Unlock()
		return false
	}
	r.inflight[op.Range] = op
	if op.Kind == placement.OpMerge {
		r.inflight[op.Other] = op
	}
	if movesData(op) {
		r.toNode[op.Target]++
	}
	r.starts = append(r.starts, now)
	r.mu.Unlock()

	r.s.wg.Add(1)
	go func() {
		defer r.s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
		defer cancel()
		go func() {
			select {
			case <-r.s.stopper:
				cancel()
			case <-ctx.Done():
			}
		}()
		if err := r.exec(ctx, op); err != nil && !errors.Is(err, context.Canceled) {
			r.s.events.Record("operator-failed", rangeSubject(op.Range), "%s (%s: %s) failed: %v", op, op.Policy, op.Reason, err)
		}
		r.mu.Lock()
		delete(r.inflight, op.Range)
		if op.Kind == placement.OpMerge {
			delete(r.inflight, op.Other)
		}
		if movesData(op) {
			r.toNode[op.Target]--
		}
		r.mu.Unlock()
	}()
	return true
}

// has reports whether any of the ranges has an operator in flight (caller
// holds mu).
func (r *runner) has(ids ...uint64) bool {
	for _, id := range ids {
		if _, ok := r.inflight[id]; ok && id != 0 {
			return true
		}
	}
	return false
}

// exec carries out one operator through the same admin paths an operator's
// ctl commands take, so events and checks are the same.
func (r *runner) exec(ctx context.Context, op placement.Operator) error {
	admin := &adminService{s: r.s}
	reason := op.Policy + ": " + op.Reason
	var err error
	switch op.Kind {
	case placement.OpAddVoter:
		_, err = admin.ChangeReplicas(ctx, &tidekvpb.ChangeReplicasRequest{RangeId: op.Range, AddNodeId: op.Target, Reason: reason})
	case placement.OpAddLearner:
		_, err = admin.ChangeReplicas(ctx, &tidekvpb.ChangeReplicasRequest{RangeId: op.Range, AddNodeId: op.Target, Learner: true, Reason: reason})
	case placement.OpRemoveReplica:
		_, err = admin.ChangeReplicas(ctx, &tidekvpb.ChangeReplicasRequest{RangeId: op.Range, RemoveNodeId: op.Source, Reason: reason})
	case placement.OpMoveReplica:
		_, err = admin.ChangeReplicas(ctx, &tidekvpb.ChangeReplicasRequest{RangeId: op.Range, AddNodeId: op.Target, RemoveNodeId: op.Source, Reason: reason})
	case placement.OpTransferLease:
		_, err = admin.TransferLease(ctx, &tidekvpb.TransferLeaseRequest{RangeId: op.Range, TargetNodeId: op.Target, Reason: reason})
	case placement.OpMerge:
		_, err = admin.Merge(ctx, &tidekvpb.MergeRequest{LeftRangeId: op.Range, Reason: reason})
	case placement.OpSplit:
		_, err = admin.Split(ctx, &tidekvpb.SplitRequest{RangeId: op.Range, SplitKey: op.SplitKey, ByLoad: op.SplitByLoad, Reason: reason})
	default:
		err = fmt.Errorf("operator %s not supported", op.Kind)
	}
	return err
}
