package metarange

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
)

// A join naming no address is refused as bad input before the meta
// replica is touched (there is none here: touching it would panic).
func TestJoinNeedsAnAddress(t *testing.T) {
	_, err := Handlers{}.Join(context.Background(), nil, &tidekvpb.JoinRequest{HttpAddr: "h:1"})
	if !errors.Is(err, kverr.ErrInvalidArgument) || err.Error() != "join: grpc_addr is required" {
		t.Fatalf("join without grpc_addr: %v, want kverr's invalid argument", err)
	}
}

// The directory lists the meta range first, then the ranges by start key.
func TestSortRangesMetaFirst(t *testing.T) {
	info := func(id uint64, start string) *tidekvpb.RangeInfo {
		return &tidekvpb.RangeInfo{Desc: &tidekvpb.RangeDescriptor{RangeId: id, StartKey: []byte(start)}}
	}
	rs := []*tidekvpb.RangeInfo{info(7, "m"), info(3, "a"), info(keys.MetaRangeID, "zzz"), info(5, "")}
	sortRanges(rs)
	var got []uint64
	for _, r := range rs {
		got = append(got, r.GetDesc().GetRangeId())
	}
	if want := []uint64{keys.MetaRangeID, 5, 3, 7}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
