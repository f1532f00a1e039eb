package adminroute

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// detailErr is a peer's answer carrying d, as the fake node reads it.
type detailErr struct{ d *tidekvpb.ErrorDetail }

func (e detailErr) Error() string { return e.d.GetKind().String() }

// fakeNode has no replica (it leads nothing), knows nodes 1-3 at n1-n3,
// and wraps a typed error in wireErr as its status.
type fakeNode struct{}

type wireErr struct{ err error }

func (e wireErr) Error() string { return "wire: " + e.err.Error() }
func (e wireErr) Unwrap() error { return e.err }

func (fakeNode) Replica(uint64) *raftstore.Replica { return nil }
func (fakeNode) Self() string                      { return "n1" }
func (fakeNode) ID() uint64                        { return 1 }
func (fakeNode) Addr(id uint64) (string, bool) {
	if id >= 1 && id <= 3 {
		return []string{"", "n1", "n2", "n3"}[id], true
	}
	return "", false
}
func (fakeNode) Members() []string { return []string{"n1", "n2", "n3"} }
func (fakeNode) Directory(context.Context) (*tidekvpb.RangesResponse, error) {
	d := &tidekvpb.RangeDescriptor{RangeId: 7, Replicas: []*tidekvpb.ReplicaDescriptor{{NodeId: 1}, {NodeId: 3}, {NodeId: 2}}}
	return &tidekvpb.RangesResponse{Ranges: []*tidekvpb.RangeInfo{{Desc: d, LeaderNodeId: 3}}}, nil
}
func (fakeNode) Status(err error) error { return wireErr{err} }
func (fakeNode) Detail(err error) *tidekvpb.ErrorDetail {
	var d detailErr
	if errors.As(err, &d) {
		return d.d
	}
	return nil
}

func newRouter(t *testing.T) *Router {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	r := New(fakeNode{}, []string{"seed", "n2"}, func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}, stop)
	t.Cleanup(r.Close)
	return r
}

func noLocal(context.Context, *raftstore.Replica) (int, error) { panic("no local replica leads") }

// A call forwarded here, where no replica leads, is answered with the
// routing error for the caller to follow, not forwarded again.
func TestForwardedCallIsNotForwardedAgain(t *testing.T) {
	r := newRouter(t)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(forwardedKey, "1"))
	remote := func(context.Context, tidekvpb.AdminClient) (int, error) {
		t.Fatal("a forwarded call was forwarded again")
		return 0, nil
	}
	var nl *raftstore.NotLeaderError
	if _, err := Meta(ctx, r, noLocal, remote); !errors.As(err, &nl) || nl.RangeID != keys.MetaRangeID {
		t.Fatalf("meta call: %v, want the meta range's NotLeaderError", err)
	}
	var nf *raftstore.RangeNotFoundError
	if _, err := Range(ctx, r, 7, noLocal, remote); !errors.As(err, &nf) || nf.RangeID != 7 {
		t.Fatalf("range call: %v, want RangeNotFoundError for range 7", err)
	}
}

// Meta follows the nodes it knows in order (the last-learnt leaseholder,
// the directory, the join addresses, each once), learns the leaseholder
// from a NOT_LEASEHOLDER hint, and tries it first next time; a real
// answer from a leaseholder ends the call.
func TestMetaLearnsTheLeaseholder(t *testing.T) {
	r := newRouter(t)
	if got, want := r.metaCandidates(), []string{"n1", "n2", "n3", "seed"}; !slices.Equal(got, want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
	calls := 0
	_, err := Meta(context.Background(), r, noLocal, func(context.Context, tidekvpb.AdminClient) (int, error) {
		calls++
		if calls == 1 { // n2
			return 0, detailErr{&tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_NOT_LEASEHOLDER, LeaderAddr: "n3"}}
		}
		return 1, nil // n3
	})
	if err != nil || calls != 2 {
		t.Fatalf("meta call: %v after %d calls, want success on the second", err, calls)
	}
	if got := r.metaCandidates()[0]; got != "n3" {
		t.Fatalf("first candidate %q after n3 answered, want n3", got)
	}
	calls = 0
	_, err = Meta(context.Background(), r, noLocal, func(context.Context, tidekvpb.AdminClient) (int, error) {
		calls++
		return 0, detailErr{&tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_INVALID_ARGUMENT}}
	})
	if d := (fakeNode{}).Detail(err); d.GetKind() != tidekvpb.ErrorKind_INVALID_ARGUMENT || calls != 1 {
		t.Fatalf("meta call refused by the leaseholder: %v after %d calls, want its answer after 1", err, calls)
	}
}

// A range's candidates are the nodes the directory names for it, its
// leaseholder first, never this node.
func TestRangeCandidates(t *testing.T) {
	r := newRouter(t)
	if got, want := r.rangeCandidates(context.Background(), 7), []string{"n3", "n2"}; !slices.Equal(got, want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
}
