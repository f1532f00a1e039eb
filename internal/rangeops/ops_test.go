package rangeops

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/placement"
)

// fakeNode knows nodes 1-3 and has no replica: every call the tests make
// must be refused before it needs one.
type fakeNode struct{ Node }

func (fakeNode) IsMember(id uint64) bool { return id >= 1 && id <= 3 }
func (fakeNode) CheckKey(key []byte) error {
	if len(key) > 8 {
		return kverr.Invalid("key too long")
	}
	return nil
}

// Requests that cannot be right are refused as kverr's INVALID_ARGUMENT
// before any routing, in the sentence the operator sees.
func TestRefusesBadRequestsBeforeRouting(t *testing.T) {
	o := Ops{Node: fakeNode{}} // no Route: routing would panic
	ctx := context.Background()
	for _, c := range []struct {
		name string
		call func() error
		want string
	}{
		{"split without key or range", func() error { _, err := o.Split(ctx, &tidekvpb.SplitRequest{}); return err },
			"split: give a split key or a range ID"},
		{"split at a key the node refuses", func() error {
			_, err := o.Split(ctx, &tidekvpb.SplitRequest{SplitKey: []byte("much too long")})
			return err
		}, "key too long"},
		{"change naming no node", func() error {
			_, err := o.ChangeReplicas(ctx, &tidekvpb.ChangeReplicasRequest{RangeId: 7})
			return err
		}, "change replicas: name a node to add or to remove"},
		{"add a non-member", func() error {
			_, err := o.ChangeReplicas(ctx, &tidekvpb.ChangeReplicasRequest{RangeId: 7, AddNodeId: 4})
			return err
		}, "node 4 is not a member of the cluster"},
	} {
		err := c.call()
		if !errors.Is(err, kverr.ErrInvalidArgument) || err.Error() != c.want {
			t.Errorf("%s: %v, want INVALID_ARGUMENT %q", c.name, err, c.want)
		}
	}
}

// The control loop's operators run in process and are refused in the
// typed vocabulary (kverr), not a gRPC status; an operator of a kind with
// no operation is an error, not a silent success.
func TestExecuteTyped(t *testing.T) {
	o := Ops{Node: fakeNode{}} // no Route: routing would panic
	ctx := context.Background()
	err := o.Execute(ctx, placement.Operator{Kind: placement.OpAddVoter, Range: 7, Target: 4, Policy: "repair", Reason: "r"})
	if !errors.Is(err, kverr.ErrInvalidArgument) || err.Error() != "node 4 is not a member of the cluster" {
		t.Errorf("add a non-member: %v, want kverr's INVALID_ARGUMENT", err)
	}
	if _, ok := status.FromError(err); ok {
		t.Errorf("add a non-member: %v is a gRPC status", err)
	}
	if err := o.Execute(ctx, placement.Operator{Kind: placement.OpKind(250)}); err == nil {
		t.Error("an unknown operator kind: no error")
	}
}
