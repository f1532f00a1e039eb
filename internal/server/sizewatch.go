package server

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The size watch (internal/sizewatch) on this node: its ranges' sizes,
// the write budgets that hold writes under Θmax, and the reports that
// wake the control loop for a placement-only round.

// sizeNode is the node as its size watch sees it.
type sizeNode struct{ s *Server }

func (n sizeNode) Replicas() []*raftstore.Replica { return n.s.store.Replicas() }
func (n sizeNode) Placement() placement.Config    { return n.s.clusterConfig().Placement }

func (n sizeNode) ReplicaFor(key []byte) (*raftstore.Replica, error) { return n.s.replicaFor(key) }

func (n sizeNode) Crossed(d *tidekvpb.RangeDescriptor, bytes uint64) {
	n.s.report.Crossed(d, bytes)
}

func (n sizeNode) RangeBusy(id uint64) error {
	return withDetail(codes.ResourceExhausted, fmt.Sprintf("range %d is above its size limit (or its size is not known yet) and has not split, retry", id),
		&tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_RANGE_BUSY, RetryAfterMs: rangeBusyRetryMs})
}

// rangeBusyRetryMs is the retry hint of a held write's refusal.
const rangeBusyRetryMs = 50

// sizeLoop watches sizes every SizeWatchInterval, and at once (at most
// every sizePokeGap) when a write finds its range without a budget: a
// range just split or just led, whose writes would otherwise wait for the
// next tick.
func (s *Server) sizeLoop() {
	s.sizes.Poke() // a first pass at once: budgets from the start
	s.bg.Wakeable(s.cfg.SizeWatchInterval, sizePokeGap, s.sizes.Woken(), s.sizes.Round, s.sizes.Round)
}

const sizePokeGap = 20 * time.Millisecond
