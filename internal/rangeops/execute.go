package rangeops

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/placement"
)

// ChangedError refuses a split decided at a generation the range has left
// since (it split or merged): nothing was done. The gRPC edge answers it
// as ABORTED.
type ChangedError struct {
	RangeID, Decided, Now uint64
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("range %d changed since the split was decided (generation %d, now %d): nothing done", e.RangeID, e.Decided, e.Now)
}

// RefusedError refuses an operation its target node cannot take (a lease
// for a node whose clock is not trusted): nothing was done. The gRPC edge
// answers it as FAILED_PRECONDITION.
type RefusedError struct {
	Node uint64
	Why  error
}

func (e *RefusedError) Error() string { return fmt.Sprintf("node %d: %v", e.Node, e.Why) }
func (e *RefusedError) Unwrap() error { return e.Why }

// Execute carries out one of the control loop's operators in process:
// the operations an operator's ctl commands run, with their checks and
// events, called with Go values and answering typed errors. A split
// decided at a generation the range has left is nothing to do.
func (o Ops) Execute(ctx context.Context, op placement.Operator) error {
	reason := op.Policy + ": " + op.Reason
	var err error
	switch op.Kind {
	case placement.OpAddVoter:
		_, err = o.ChangeReplicas(ctx, &tidekvpb.ChangeReplicasRequest{RangeId: op.Range, AddNodeId: op.Target, Reason: reason})
	case placement.OpAddLearner:
		_, err = o.ChangeReplicas(ctx, &tidekvpb.ChangeReplicasRequest{RangeId: op.Range, AddNodeId: op.Target, Learner: true, Reason: reason})
	case placement.OpRemoveReplica:
		_, err = o.ChangeReplicas(ctx, &tidekvpb.ChangeReplicasRequest{RangeId: op.Range, RemoveNodeId: op.Source, Reason: reason})
	case placement.OpMoveReplica:
		_, err = o.ChangeReplicas(ctx, &tidekvpb.ChangeReplicasRequest{RangeId: op.Range, AddNodeId: op.Target, RemoveNodeId: op.Source, Reason: reason})
	case placement.OpTransferLease:
		_, err = o.TransferLease(ctx, &tidekvpb.TransferLeaseRequest{RangeId: op.Range, TargetNodeId: op.Target, Reason: reason})
	case placement.OpMerge:
		_, err = o.Merge(ctx, &tidekvpb.MergeRequest{LeftRangeId: op.Range, Reason: reason})
	case placement.OpSplit:
		_, err = o.Split(ctx, &tidekvpb.SplitRequest{RangeId: op.Range, SplitKey: op.SplitKey, ByLoad: op.SplitByLoad, Reason: reason,
			ExpectedGeneration: op.Generation})
		// A split forwarded to the range's leaseholder comes back in its
		// wire form (adminroute answers the peer's status as it is).
		var changed *ChangedError
		if errors.As(err, &changed) || status.Code(err) == codes.Aborted {
			err = nil
		}
	default:
		err = fmt.Errorf("operator %s not supported", op.Kind)
	}
	return err
}
