package raftstore

import (
	"context"
	"io"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Transport carries Raft traffic to other nodes. The store owns this
// interface; internal/transport implements it over gRPC and in memory.
type Transport interface {
	// Send queues a message for its node without blocking; it returns false
	// when the message was dropped (queue full or node unknown). Raft
	// tolerates drops.
	Send(m *tidekvpb.RaftMessage) bool
	// SendSnapshot streams a snapshot: the MsgSnap header, then the SST
	// file's bytes. It returns once the receiver accepted or refused it.
	SendSnapshot(ctx context.Context, header *tidekvpb.RaftMessage, sst io.Reader) error
}
