package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// TestExpiryOnTheWire: TTLs travel in whole milliseconds rounded up (a
// positive one never becomes "none"), SetTTL ops as EXPIRE without a
// value, and a negative TTL never leaves the client.
func TestExpiryOnTheWire(t *testing.T) {
	req, err := writeRequest(context.Background(), []Op{
		{Key: []byte("a"), Value: []byte("v"), Expiry: Expiry{TTL: 1500 * time.Microsecond}},
		{Key: []byte("b"), Value: []byte("v"), Expiry: Expiry{Keep: true}},
		{Key: []byte("c"), Value: []byte("ignored"), SetTTL: true, Expiry: Expiry{TTL: time.Second}},
		{Key: []byte("d"), Delete: true},
		{Key: []byte("e"), Value: []byte("v"), Expiry: Expiry{At: time.UnixMilli(1_700_000_000_123)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []*tidekvpb.WriteOp{
		{Key: []byte("a"), Value: []byte("v"), TtlMs: 2},
		{Key: []byte("b"), Value: []byte("v"), KeepTtl: true},
		{Kind: tidekvpb.WriteOp_EXPIRE, Key: []byte("c"), TtlMs: 1000},
		{Kind: tidekvpb.WriteOp_DELETE, Key: []byte("d")},
		{Key: []byte("e"), Value: []byte("v"), ExpireAtMs: 1_700_000_000_123},
	}
	for i, op := range req.GetOps() {
		if op.String() != want[i].String() {
			t.Errorf("op %d = %v, want %v", i, op, want[i])
		}
	}
	for _, e := range []Expiry{{TTL: -time.Second}, {At: time.Unix(-1, 0)}} {
		if _, err := writeRequest(context.Background(), []Op{{Key: []byte("a"), Expiry: e}}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("expiry %+v: %v", e, err)
		}
	}
}
