// Package kvbatch maps the requests of a KV Batch stream onto the unary KV
// handlers and their answers (or errors) back onto stream answers, so that
// a node and a test double serve the stream with the same rules:
// docs/batch-rpc.md describes the stream.
//
// It imports nothing under internal/ (internal/lint).
package kvbatch
