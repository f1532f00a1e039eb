package rangeops

import (
	"context"
	"errors"
	"testing"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
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
