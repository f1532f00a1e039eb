package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

// A transaction whose step a range's node refuses as invalid fails once,
// with that node's sentence: the coordinator passes the refusal its
// routing client got on as INVALID_ARGUMENT, which neither it nor the
// client retries. The refusal here is a read at a timestamp beyond the
// maximum offset of the node's held clock, reached through the
// client-clock break (the coordinator reads at the client's timestamp,
// from a clock twice the maximum offset ahead). Answered UNAVAILABLE, the
// client ran it MaxTxnAttempts times and said "transaction must restart".
func TestTxnInvalidStepFailsOnce(t *testing.T) {
	clock := manualclock.New(time.Now().Add(10 * time.Second))
	tc := startClusterWith(t, 1, func(c *Config) {
		c.Raft.Clock = clock
		c.Raft.TestingBreaks.ClientClock = true
	})
	maxOffset := tc.cfgs[0].Raft.MaxClockOffset
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := tc.client(func(cfg *client.Config) { cfg.WallClock = behind{clock, -2 * maxOffset} })
	// A new cluster takes transactions at once (it starts at its binary's
	// log version).
	if err := tc.client().Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, []byte("first"), []byte("x")) }); err != nil {
		t.Fatalf("a first transaction: %v", err)
	}
	attempts := 0
	err := c.Txn(ctx, func(tx *client.Tx) error {
		attempts++
		_, err := tx.GetVersion(ctx, []byte("k"))
		return err
	})
	if attempts != 1 || !errors.Is(err, client.ErrInvalidArgument) || errors.Is(err, client.ErrTxnRetry) ||
		!strings.Contains(err.Error(), "more than the maximum clock offset") {
		t.Fatalf("a transaction reading %v ahead of the node's clock: %v after %d attempts; want one attempt refused as invalid",
			2*maxOffset, err, attempts)
	}
}

// Through the node's API, a refresh up to, a commit of a transaction's
// record at and a resolve at a timestamp more than the maximum offset
// ahead of the node's held clock are refused at once as invalid, as a
// read, intents and a one-phase commit are (TestTxnBeyondMaxOffsetRefused).
func TestTxnEndStepsBeyondMaxOffsetRefused(t *testing.T) {
	tc, clock, c, ctx := stillCluster(t)
	maxOffset := tc.cfgs[0].Raft.MaxClockOffset
	from := hlc.Timestamp{WallTime: clock.Now().UnixNano()}
	ahead := hlc.Timestamp{WallTime: clock.Now().UnixNano() + int64(2*maxOffset)}
	key := []byte("ahead-key")
	txn := &tidekvpb.TxnKey{Id: []byte("ahead-txn"), Anchor: key}
	steps := map[string]func(context.Context) error{
		"refresh reads": func(ctx context.Context) error {
			return c.RefreshReads(ctx, txn.GetId(), [][]byte{key}, from, ahead)
		},
		"refresh span": func(ctx context.Context) error {
			return c.RefreshSpans(ctx, txn.GetId(), []*tidekvpb.KeySpan{{StartKey: []byte("a"), EndKey: []byte("z")}}, from, ahead)
		},
		"commit record": func(ctx context.Context) error {
			_, err := c.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: txn, Op: tidekvpb.TxnRecordOp_TXN_COMMIT, CommitTimestamp: tidekvpb.FromHLC(ahead)})
			return err
		},
		"resolve committed": func(ctx context.Context) error {
			return c.ResolveIntents(ctx, txn, [][]byte{key}, true, ahead)
		},
	}
	for name, step := range steps {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := step(sctx)
		cancel()
		if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "more than the maximum clock offset") {
			t.Errorf("%s at %s, %v ahead of the node's clock: %v, want it refused as invalid", name, ahead, 2*maxOffset, err)
		}
	}
}
