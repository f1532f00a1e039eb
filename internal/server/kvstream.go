package server

import (
	"context"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/kvbatch"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/security"
)

// Batch serves KV requests multiplexed on one stream (internal/kvstream,
// docs/batch-rpc.md).
func (k *kvService) Batch(stream tidekvpb.KV_BatchServer) error { return k.stream.Serve(stream) }

// streamNode is the node as its Batch streams see it.
type streamNode struct{ s *Server }

func (n streamNode) Identify(ctx context.Context) (security.Identity, error) {
	return n.s.streamIdentity(ctx)
}

func (n streamNode) Clock() *hlc.Clock { return n.s.store.HLC() }

func (n streamNode) Received(msg *tidekvpb.KVBatchRequest) {
	_ = n.s.updateClock(msg.GetHlc(), "a client")
	n.s.metrics.StreamMessages.Inc()
	n.s.metrics.StreamRequests.Add(float64(len(msg.GetRequests())))
}

func (n streamNode) Priority(p tidekvpb.Priority) admission.Priority { return admissionPriority(p) }

func (n streamNode) Refuse(id security.Identity, req *tidekvpb.KVRequest, p admission.Priority) *tidekvpb.KVResponse {
	if err := n.s.permitWrite(id, req); err != nil {
		return kvbatch.ErrResponse(req.GetId(), err)
	}
	if err := n.s.adm.Gate(p); err != nil {
		return refusedAnswer(req.GetId(), err)
	}
	return nil
}

// streamIdentity is who opened a Batch stream on a secure node (the stream
// interceptor has authenticated it for reads); the zero Identity on an
// insecure one.
func (s *Server) streamIdentity(ctx context.Context) (security.Identity, error) {
	if s.sec == nil {
		return security.Identity{}, nil
	}
	return security.Authenticator{Users: s.sec.users}.Identify(ctx)
}

// permitWrite checks that a stream's user may make a write, as the
// write's unary method's role check would (the stream was opened with
// the role to read).
func (s *Server) permitWrite(id security.Identity, req *tidekvpb.KVRequest) error {
	if s.sec == nil {
		return nil
	}
	return security.Permit(id, kvbatch.Method(req))
}
