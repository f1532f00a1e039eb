package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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
	// The node takes transactions (log version) before the refusal is
	// what the test sees.
	eventually(t, 20*time.Second, "the cluster takes transactions", func() error {
		return tc.client().Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, []byte("first"), []byte("x")) })
	})
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
