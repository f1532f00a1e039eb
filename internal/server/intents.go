package server

import (
	"context"
	"log"

	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/txnclient"
)

// Requests that meet another transaction's intent push its transaction
// and wait for it within a budget; the coordinator (internal/txn,
// intents.go) holds how. Here: the serving path's retry loop and the GC
// queue's sweep.

// sweepIntents pushes the transactions of r's intents older than the
// expiry and resolves those it finds final: the intents no request runs
// into (a dead coordinator's on keys nobody reads). The GC queue runs it
// on the ranges it leads; a live transaction's intents stay.
func (s *Server) sweepIntents(ctx context.Context, r *raftstore.Replica) {
	if !r.MayHoldIntents() {
		return
	}
	ies, err := r.Intents(maxSweptIntents)
	if err != nil {
		log.Printf("range %d: listing intents: %v", r.RangeID(), err)
		return
	}
	old := s.store.HLC().Now().WallTime - s.cfg.Txn.Expiry.Nanoseconds()
	for _, ie := range ies {
		if ie.Timestamp.WallTime > old {
			continue
		}
		if _, err := s.txn.coord.Push(ctx, ie); err != nil {
			log.Printf("range %d: pushing the transaction of an old intent: %v", r.RangeID(), err)
			return
		}
	}
}

// maxSweptIntents bounds one range's sweep per GC round.
const maxSweptIntents = 1000

// routerNode is the node the routing client for the transaction steps it
// sends to ranges (pushes, resolutions, a coordinator's operations)
// routes from.
func (s *Server) routerNode() txnclient.Node {
	return txnclient.Node{Addr: s.Addr(), Locality: s.cfg.Locality, TLS: s.peerTLS()}
}
