package keyspaces

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/internal/cache"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/metrics"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/storage"
)

// metaNode is a node whose meta range holds cat: Refresh hands it over
// and counts the refreshes.
type metaNode struct {
	sp        *Spaces
	cat       ksconfig.Catalogue
	refreshes int
}

func (n *metaNode) NodeID() uint64                      { return 1 }
func (n *metaNode) Replicas() []*raftstore.Replica      { return nil }
func (n *metaNode) LookupKey([]byte) *raftstore.Replica { return nil }
func (n *metaNode) Replica(uint64) *raftstore.Replica   { return nil }
func (n *metaNode) RecountAfter() uint64                { return 1 }
func (n *metaNode) Refresh(context.Context) error       { n.refreshes++; n.sp.Set(n.cat); return nil }
func (n *metaNode) Fetch(context.Context, string, []byte) ([]byte, bool, error) {
	return nil, false, nil
}
func (n *metaNode) Size(context.Context, *raftstore.Replica, uint64) (raftstore.DataSize, error) {
	return raftstore.DataSize{}, nil
}
func (n *metaNode) ExactSize(context.Context, *raftstore.Replica) (raftstore.DataSize, error) {
	return raftstore.DataSize{}, nil
}

func openSpaces(t *testing.T) (*Spaces, *metaNode) {
	t.Helper()
	sp, err := Open(storage.NewMem(), Config{Mem: memengine.DefaultConfig(), Cache: cache.DefaultConfig()}, metrics.New(), events.New(events.DefaultConfig(), 1, time.Now))
	if err != nil {
		t.Fatal(err)
	}
	n := &metaNode{sp: sp}
	sp.SetNode(n)
	return sp, n
}

func space(id keyspace.ID, name string, mode keyspace.Mode) ksconfig.KeySpace {
	s := ksconfig.DefaultSettings()
	s.Name, s.Mode = name, mode
	return ksconfig.KeySpace{ID: id, Settings: s}
}

// A node's copy of the catalogue: a name it does not know refreshes it
// from the meta range once, an older (shorter) catalogue never replaces
// it, and its refusals are kverr's INVALID_ARGUMENT.
func TestCatalogueCopyAndChecks(t *testing.T) {
	ctx := context.Background()
	sp, n := openSpaces(t)
	users := space(1, "users", keyspace.Ordered)
	n.cat = ksconfig.NewCatalogue([]ksconfig.KeySpace{users})

	if err := sp.Check(ctx, "", keyspace.ReservedStart()); !errors.Is(err, kverr.ErrInvalidArgument) {
		t.Fatalf("a default key space request in the reserved area: %v", err)
	}
	if n.refreshes != 0 {
		t.Fatalf("the default key space refreshed the catalogue %d times", n.refreshes)
	}
	key := users.Codec().Encode([]byte("alice"))
	if err := sp.Check(ctx, "users", key); err != nil || n.refreshes != 1 {
		t.Fatalf("a key of users: %v after %d refreshes, want nil after 1", err, n.refreshes)
	}
	if err := sp.Check(ctx, "users", []byte("alice")); !errors.Is(err, kverr.ErrInvalidArgument) || n.refreshes != 1 {
		t.Fatalf("a key outside users: %v after %d refreshes", err, n.refreshes)
	}
	if _, err := sp.ByName(ctx, "nope"); !errors.Is(err, kverr.ErrInvalidArgument) || n.refreshes != 2 {
		t.Fatalf("an unknown key space: %v after %d refreshes", err, n.refreshes)
	}

	sp.Set(nil) // older than the copy
	if _, ok := sp.Catalogue().ByName("users"); !ok {
		t.Fatal("a shorter catalogue replaced the copy")
	}
	sessions := space(2, "sessions", keyspace.Hashed)
	sessions.RF = 5
	sp.Set(ksconfig.NewCatalogue([]ksconfig.KeySpace{users, sessions}))
	if rf := sp.RF(keyspace.Prefix(2)); rf != 5 {
		t.Fatalf("RF of a sessions range = %d, want 5", rf)
	}
	if _, err := sp.ScanEnd(ctx, "sessions", keyspace.Prefix(2), nil, false); !errors.Is(err, kverr.ErrInvalidArgument) {
		t.Fatalf("a key-order scan of a hashed key space: %v", err)
	}
	_, hi := keyspace.Span(2)
	if end, err := sp.ScanEnd(ctx, "sessions", keyspace.Prefix(2), nil, true); err != nil || string(end) != string(hi) {
		t.Fatalf("a hash-order scan ends at %q, %v; want the key space's end %q", end, err, hi)
	}
}
