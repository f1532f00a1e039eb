package raftstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// NotLeaderError says this node holds a replica of the range but not its
// lease. LeaderNodeID is 0 when no leader is known.
type NotLeaderError struct {
	RangeID      uint64
	LeaderNodeID uint64
	Desc         *tidekvpb.RangeDescriptor
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("range %d: not leaseholder (leader node %d)", e.RangeID, e.LeaderNodeID)
}

// RangeNotFoundError says no local replica covers the key or range.
type RangeNotFoundError struct {
	RangeID uint64
	Key     []byte
}

func (e *RangeNotFoundError) Error() string {
	if e.RangeID != 0 {
		return fmt.Sprintf("range %d not found on this node", e.RangeID)
	}
	return fmt.Sprintf("no local replica covers key %q", e.Key)
}

// KeyMismatchError says the key is outside the range the request reached,
// typically because a split happened meanwhile.
type KeyMismatchError struct {
	Key  []byte
	Desc *tidekvpb.RangeDescriptor
}

func (e *KeyMismatchError) Error() string {
	return fmt.Sprintf("key %q is outside range %d [%q, %q)", e.Key, e.Desc.GetRangeId(), e.Desc.GetStartKey(), e.Desc.GetEndKey())
}

// RangeBusyError says an admin operation was refused because another one
// held the range for longer than it would wait; nothing was done.
type RangeBusyError struct {
	RangeID uint64
	What    string
	Waited  time.Duration
}

func (e *RangeBusyError) Error() string {
	return fmt.Sprintf("range %d is busy with %s (waited %v); nothing was done, retry after it", e.RangeID, e.What, e.Waited)
}

var (
	// ErrAmbiguous: a proposal's outcome is unknown (leadership changed or the
	// caller gave up); it may still be applied.
	ErrAmbiguous = errors.New("ambiguous result: the write may or may not have been applied")
	// ErrOverloaded: the replica's proposal queue is full.
	ErrOverloaded = errors.New("replica overloaded, retry")
	// ErrStopped: the store is shutting down.
	ErrStopped = errors.New("store stopped")
	// ErrInvalidRequest: the request is malformed for this replica.
	ErrInvalidRequest = errors.New("invalid request")
)
