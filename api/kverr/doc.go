// Package kverr is TideKV's one error vocabulary: the errors a node's
// replicas, its KV API, the Go client and the Redis gateway all speak.
//
// An error has a Kind, the value an ErrorDetail carries on the wire
// (tidekvpb.ErrorKind), which says what its receiver should do: go to the
// leaseholder, refresh its range cache, retry later, restart a
// transaction, or give up. Sentinels (ErrAmbiguous, ErrOverloaded, ...)
// are the kinds as values: errors.Is(err, ErrAmbiguous) holds for any
// error of kind AMBIGUOUS, whatever its sentence, so a replica's "replica
// overloaded, retry" and a client's "tidekv: overloaded" are the same
// error to a caller. Structured errors (NotLeaderError, ...) carry what
// the receiver needs to act, such as the leaseholder's node.
//
// Conversion to and from a gRPC status happens only at the edges: the
// node's gRPC services and the client's transport. The Redis gateway maps
// kinds to RESP replies (internal/redisgw).
//
// It imports the standard library and api/tidekvpb; it
// imports nothing under internal/ (internal/lint).
package kverr
