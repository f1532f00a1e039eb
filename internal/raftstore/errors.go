package raftstore

import (
	"errors"

	"github.com/tidekv/tidekv/api/kverr"
)

// The routing errors are kverr's (the one error vocabulary); the names
// here keep raftstore's many uses of them unchanged.
type (
	NotLeaderError     = kverr.NotLeaderError
	RangeNotFoundError = kverr.RangeNotFoundError
	KeyMismatchError   = kverr.KeyMismatchError
	RangeBusyError     = kverr.RangeBusyError
)

var (
	// ErrAmbiguous: a proposal's outcome is unknown (leadership changed or the
	// caller gave up); it may still be applied.
	ErrAmbiguous error = kverr.New(kverr.Ambiguous, "ambiguous result: the write may or may not have been applied")
	// ErrOverloaded: the replica's proposal queue is full.
	ErrOverloaded error = kverr.New(kverr.Overloaded, "replica overloaded, retry")
	// ErrStopped: the store is shutting down.
	ErrStopped = errors.New("store stopped")
	// ErrInvalidRequest: the request is malformed for this replica.
	ErrInvalidRequest error = kverr.New(kverr.InvalidArgument, "invalid request")
)
