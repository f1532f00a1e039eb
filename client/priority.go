package client

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// PriorityHeader is the request header that carries a request's
// tidekvpb.Priority (its name) to the node, which reads it before the
// request's payload.
const PriorityHeader = "tidekv-priority"

// WithPriority returns a context whose requests carry priority p: bulk
// jobs use PRIORITY_BACKGROUND so that a busy node defers them to
// foreground work; a front end whose connections each wait for their
// answer uses PRIORITY_HIGH, which a node bounds only by its in-flight cap
// (docs/admission.md).
func WithPriority(ctx context.Context, p tidekvpb.Priority) context.Context {
	if p == tidekvpb.Priority_PRIORITY_NORMAL {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, PriorityHeader, p.String())
}
