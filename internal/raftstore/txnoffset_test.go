package raftstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// A refresh up to, a commit of a record at and a resolve at a timestamp
// more than the maximum offset ahead of the store's clock are refused as
// invalid, as reads and intents at one are (admitTimestamp): no clock
// within the offset assumption hands such a timestamp out, and a commit
// there would put values where later reads of nearer clocks cannot see
// them. The store's clock is held; nothing changes.
func TestTxnStepsBeyondMaxOffsetRefused(t *testing.T) {
	_, r, clock, ctx := clockedLeader(t)
	from := r.store.hlc.Now()
	ref := &tidekvpb.TxnRef{Id: []byte("T"), Anchor: []byte("k")}
	if _, err := r.WriteIntents(ctx, ref, from, []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if rec, err := r.HeartbeatTxn(ctx, ref, false); err != nil || rec.GetStatus() != tidekvpb.TxnStatus_TXN_PENDING {
		t.Fatalf("record: %v, %v", rec, err)
	}
	maxOffset := r.store.hlc.MaxOffset()
	ahead := hlc.Timestamp{WallTime: clock.Now().UnixNano() + int64(2*maxOffset)}
	keys := [][]byte{[]byte("k")}
	for name, step := range map[string]func() error{
		"refresh reads": func() error { return r.RefreshReads(ctx, keys, from, ahead, ref.GetId()) },
		"refresh span": func() error {
			_, err := r.RefreshSpan(ctx, []byte("a"), []byte("z"), from, ahead, ref.GetId())
			return err
		},
		"commit record": func() error {
			_, err := r.EndTxn(ctx, ref, tidekvpb.TxnStatus_TXN_COMMITTED, ahead)
			return err
		},
		"resolve committed": func() error {
			return r.ResolveIntents(ctx, ref, keys, tidekvpb.TxnStatus_TXN_COMMITTED, ahead)
		},
	} {
		if err := step(); !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "more than the maximum clock offset") {
			t.Errorf("%s at %s, %v ahead of the store's clock: %v, want it refused as invalid", name, ahead, 2*maxOffset, err)
		}
	}
	if now := r.store.hlc.Now(); !now.Less(hlc.Timestamp{WallTime: from.WallTime + int64(time.Millisecond)}) {
		t.Errorf("the store's clock moved to %s after the refusals (from %s)", now, from)
	}
	if rec, err := r.HeartbeatTxn(ctx, ref, false); err != nil || rec.GetStatus() != tidekvpb.TxnStatus_TXN_PENDING {
		t.Errorf("record after the refusals: %v, %v; want it pending", rec, err)
	}
	if _, _, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: r.store.hlc.Now(), Txn: []byte("U")}); !errors.As(err, new(*IntentError)) {
		t.Errorf("k after the refusals: %v; want T's intent still there", err)
	}
}
