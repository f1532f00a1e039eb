package kverr

import (
	"errors"
	"fmt"
	"testing"
)

// An error of a kind is its sentinel to errors.Is whatever its sentence,
// wrapped or not; an error without a kind is only itself; KindOf finds the
// kind through wrapping and structured errors.
func TestKinds(t *testing.T) {
	replica := New(Overloaded, "replica overloaded, retry")
	if !errors.Is(fmt.Errorf("put: %w", replica), ErrOverloaded) || !errors.Is(ErrOverloaded, replica) {
		t.Error("an overload of another sentence is not ErrOverloaded")
	}
	if errors.Is(replica, ErrAmbiguous) || errors.Is(Invalid("empty key"), ErrOverloaded) {
		t.Error("errors of different kinds match")
	}
	if errors.Is(New(Unknown, "tidekv: key not found"), ErrNotFound) || !errors.Is(fmt.Errorf("%w: %q", ErrNotFound, "k"), ErrNotFound) {
		t.Error("an error without a kind matches another, or not itself")
	}
	for err, want := range map[error]Kind{
		fmt.Errorf("get: %w", &NotLeaderError{RangeID: 7, LeaderNodeID: 2}): NotLeaseholder,
		&RangeNotFoundError{Key: []byte("k")}:                               RangeNotFound,
		&KeyMismatchError{Key: []byte("k")}:                                 KeyMismatch,
		Invalid("key of %d bytes is too large", 5000):                       InvalidArgument,
		&RangeBusyError{RangeID: 7}:                                         Unknown,
		errors.New("something else"):                                        Unknown,
	} {
		if got := KindOf(err); got != want {
			t.Errorf("KindOf(%v) = %v, want %v", err, got, want)
		}
	}
	if got := Invalid("key of %d bytes is too large", 5000).Error(); got != "key of 5000 bytes is too large" {
		t.Errorf("Invalid's sentence: %q", got)
	}
}
