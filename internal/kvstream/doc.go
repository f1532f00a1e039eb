// Package kvstream serves a node's KV Batch stream (docs/batch-rpc.md):
// many KV requests multiplexed on one gRPC stream, each run through the
// same handler as its unary call (api/kvbatch.Dispatch), answered as it
// finishes with as many answers per message as are ready. It owns the
// stream's flow control (at most maxStreamInflight requests running or
// unanswered per stream, so a fast client is held back by HTTP/2 rather
// than buffered), the grouping of answers into messages under the client's
// and the node's size limits, the long-lived workers that run requests,
// and the end of every stream when the node stops.
//
// The node is reached through Node, which the package owns: who opened
// the stream, the clock that stamps answers and learns from requests, the
// counts of messages read, admission's priorities and the refusal of a
// write as it is read (a user without the role to write, a shedding
// node). It builds on api/kvbatch, api/tidekvpb, api/hlc,
// internal/admission and internal/security. It imports no server, SDK or
// network code (internal/server, client, internal/transport, net,
// net/http) (internal/lint).
package kvstream
