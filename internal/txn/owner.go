package txn

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Ownership of a transaction (docs/transactions.md, "Who may end a
// transaction"). A client begins a transaction with an ID and an owner
// token, 16 random bytes each, and sends both with every operation; the
// token appears in no answer, error or log. The coordinator takes the
// operations of an open transaction only with the token and the user it
// began with. Across nodes the token is what the cluster knows the
// transaction by: its intents and record carry a hash of the client's ID
// and token (txnID), so an ID that an error shows (they name the
// transactions whose intents they met) lets nobody act for that
// transaction on any coordinator.

// owner is who began a transaction: the owner token its client holds and
// the user it called as ("" on an insecure node).
type owner struct {
	token []byte
	user  string
}

// ownerOf is the owner a call for the transaction meta names claims to be.
func (c *Coordinator) ownerOf(ctx context.Context, meta *tidekvpb.TxnMeta) (owner, error) {
	user, err := c.deps.Node.User(ctx)
	if err != nil {
		return owner{}, err
	}
	return owner{token: meta.GetOwnerToken(), user: user}, nil
}

// check refuses a caller that is not o, the owner of client transaction
// id, with PERMISSION_DENIED.
func (o owner) check(caller owner, id []byte) error {
	if subtle.ConstantTimeCompare(o.token, caller.token) == 1 && o.user == caller.user {
		return nil
	}
	return status.Errorf(codes.PermissionDenied,
		"transaction %x belongs to another client: only the client that began it, with its owner token and as its user, may go on with it or end it; nothing was done", id)
}

// txnID is the ID the cluster knows client transaction id by: its
// intents' and record's.
func (o owner) txnID(id []byte) []byte {
	h := sha256.New()
	h.Write([]byte{byte(len(id))}) // IDs are at most 64 bytes: (id, token) pairs stay apart
	h.Write(id)
	h.Write(o.token)
	return h.Sum(nil)[:16]
}
