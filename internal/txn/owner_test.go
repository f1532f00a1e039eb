package txn

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The owner token as another user is refused; the cluster knows a
// transaction by a hash of ID and token, so the ID an error shows names no
// transaction another token can reach. (A cluster refusing other owners:
// TestTxnEndNeedsItsOwner in internal/server.)
func TestOwnerCheckAndTxnID(t *testing.T) {
	id, token := []byte("0123456789abcdef"), []byte("owner-token-0001")
	if err := (owner{token: token, user: "alice"}).check(owner{token: token, user: "bob"}, id); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the owner token as another user: %v; want PERMISSION_DENIED", err)
	}
	if a, b := (owner{token: token}).txnID(id), (owner{token: []byte("x")}).txnID(id); slices.Equal(a, b) || slices.Equal(a, id) {
		t.Fatalf("transaction IDs %x and %x for client ID %x under two tokens", a, b, id)
	}
}
