package redisgw

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/resp"
)

// A commit that ended "overloaded" may have been applied: it maps to the
// ambiguous result, never to "retry" (resp answers an OverloadedError or
// ErrOverloaded before it looks for ErrAmbiguous); a plain overload keeps
// the node's hint.
func TestAmbiguityWinsOverOverload(t *testing.T) {
	err := mapErr(fmt.Errorf("%w: %w", client.ErrAmbiguous, &client.OverloadedError{Op: "transaction commit", RetryAfter: time.Second, Reason: "overloaded"}))
	var oe *resp.OverloadedError
	if !errors.Is(err, resp.ErrAmbiguous) || errors.Is(err, resp.ErrOverloaded) || errors.As(err, &oe) {
		t.Fatalf("an ambiguous overloaded commit maps to %v (ambiguous %v, overloaded %v)", err, errors.Is(err, resp.ErrAmbiguous), errors.Is(err, resp.ErrOverloaded))
	}
	err = mapErr(&client.OverloadedError{RetryAfter: time.Second})
	if !errors.As(err, &oe) || oe.RetryAfter != time.Second {
		t.Fatalf("an overload maps to %v, want an OverloadedError retrying after 1s", err)
	}
}
