package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/backup"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

// Timestamps the cluster owns (docs/transactions.md): a transaction reads
// at its coordinator's clock, not its client's, and a read that finds a
// version in its uncertainty window moves above it, refreshing what it
// read before.

// stillCluster starts one node whose wall clock moves only when the test
// moves it, 10 s ahead of the real time, so that nothing but the test
// moves the node's timestamps (the clients' clocks, which their messages
// carry, lag it by more than the maximum offset), and waits until it takes
// transactions. Its clock then moves past the margin above which a new
// lease stamps writes (raftstore's leaseLowWater, at most twice the
// maximum offset), so that writes are stamped at the clock's time again.
func stillCluster(t *testing.T) (*testCluster, *manualclock.Clock, *client.Client, context.Context) {
	clock := manualclock.New(time.Now().Add(10 * time.Second))
	tc := startClusterWith(t, 1, func(c *Config) { c.Raft.Clock = clock })
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	// A new cluster takes transactions at once (it starts at its binary's
	// log version).
	if err := c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, []byte("first"), []byte("x")) }); err != nil {
		t.Fatalf("a first transaction: %v", err)
	}
	clock.Advance(2*tc.cfgs[0].Raft.MaxClockOffset + time.Millisecond)
	return tc, clock, c, ctx
}

// behind is a wall clock d behind another.
type behind struct {
	of raftstore.Clock
	d  time.Duration
}

func (b behind) Now() time.Time { return b.of.Now().Add(-b.d) }

// A client whose clock is 400 ms behind the cluster's (beyond the maximum
// offset, so no answer moves it) begins a transaction after a write was
// acknowledged: the transaction reads the write, read-only or not. Its
// coordinator, not its clock, picks the read timestamp.
func TestLaggingClientReadsAcknowledgedWrite(t *testing.T) {
	tc, clock, c, ctx := stillCluster(t)
	key := []byte("lag-key")
	if err := c.Put(ctx, key, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Millisecond)
	if err := c.Put(ctx, key, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	lagging := laggingClient(t, tc, clock)
	for _, readOnly := range []bool{true, false} {
		var got []byte
		var readTS hlc.Timestamp
		err := lagging.Txn(ctx, func(tx *client.Tx) error {
			v, err := tx.Get(ctx, key)
			got, readTS = v, tx.ReadTimestamp()
			if err != nil || readOnly {
				return err
			}
			return tx.Put(ctx, []byte("lag-other"), v)
		})
		if err != nil || string(got) != "v2" {
			t.Fatalf("read-only %v: a client 400 ms behind read %q (%v) at %s in a transaction begun after v2 was acknowledged; want v2",
				readOnly, got, err, readTS)
		}
	}
}

// laggingClient is a client of tc whose clock is 400 ms behind clock:
// beyond the maximum offset, so no node's answer moves it on.
func laggingClient(t *testing.T, tc *testCluster, clock raftstore.Clock) *client.Client {
	cfg := client.DefaultConfig()
	cfg.Addrs = tc.addrs()
	cfg.WallClock = behind{clock, 400 * time.Millisecond}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A backup taken by a client whose clock is 400 ms behind, begun after a
// write was acknowledged, holds the write: its cut comes from the
// cluster's clock.
func TestBackupCutFromTheClusterClock(t *testing.T) {
	tc, clock, c, ctx := stillCluster(t)
	if err := c.Put(ctx, []byte("backed-up"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	written, err := c.GetVersion(ctx, []byte("backed-up"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := c.Scan(ctx, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := backup.Backup(ctx, backup.NewClientSource(laggingClient(t, tc, clock)), t.TempDir()+"/b", backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cut, err := hlc.Parse(m.Timestamp)
	if err != nil || cut.Less(written.Version) || m.Pairs != int64(len(all)) {
		t.Fatalf("backup at %s (%v) of %d pairs; want at or above the write at %s, all %d pairs", m.Timestamp, err, m.Pairs, written.Version, len(all))
	}
}

// A read that finds a committed version above its transaction's read
// timestamp, within the maximum offset, moves the transaction up to it
// and refreshes the reads before it: when one of those changed in
// between, the transaction restarts rather than see half of the other's
// writes (serializable); when none did, it reads the version and goes on.
func TestUncertainReadRefreshesEarlierReads(t *testing.T) {
	tc, clock, c, ctx := stillCluster(t)
	writer := tc.client()
	put := func(kvs ...string) {
		t.Helper()
		err := writer.Txn(ctx, func(tx *client.Tx) error {
			for i := 0; i < len(kvs); i += 2 {
				if err := tx.Put(ctx, []byte(kvs[i]), []byte(kvs[i+1])); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	uncertain := func() float64 { return promtest.ToFloat64(tc.nodes[0].metrics.TxnUncertainRestarts) }
	put("u1", "old", "u2", "old", "u3", "old")

	for _, tt := range []struct {
		name string
		// first is what the reader reads before the other transaction
		// writes u1 and u2 (scan: a scan of the u keys).
		first    string
		attempts int
		want     string
	}{
		{"an earlier read changed: restart", "u1", 2, "new,new"},
		{"an earlier scan changed: restart", "scan", 2, "new,new"},
		{"the earlier read holds: go on", "u3", 1, "old,new"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			put("u1", "old", "u2", "old")
			before := uncertain()
			var seen []string
			attempts := 0
			err := c.Txn(ctx, func(tx *client.Tx) error {
				attempts++
				var first []byte
				var err error
				if tt.first == "scan" {
					kvs, serr := tx.Scan(ctx, []byte("u1"), []byte("u2"), 0)
					if len(kvs) == 1 {
						first = kvs[0].Value
					}
					err = serr
				} else {
					first, err = tx.Get(ctx, []byte(tt.first))
				}
				if err != nil {
					return err
				}
				if attempts == 1 {
					// Half the maximum offset later: the other's commit
					// lies in the reader's uncertainty window.
					clock.Advance(tc.cfgs[0].Raft.MaxClockOffset / 2)
					put("u1", "new", "u2", "new")
				}
				second, err := tx.Get(ctx, []byte("u2"))
				if err != nil {
					return err
				}
				seen = append(seen, string(first)+","+string(second))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if attempts != tt.attempts || !slices.Equal(seen, []string{tt.want}) {
				t.Fatalf("%d attempts saw %q; want %d, the last seeing %s and none another", attempts, seen, tt.attempts, tt.want)
			}
			if got := uncertain() - before; got != 1 {
				t.Fatalf("%v uncertain reads counted, want 1", got)
			}
		})
	}
}

// A transaction's operations and its end are taken only from the client
// that began it: a caller with its ID but another owner token (or none),
// or the token as another user, is refused with one sentence, and the
// transaction goes on as if nothing happened. A read-only user cannot end
// one at all (the method needs the role to write: internal/security). The
// owner's check across users and the transaction IDs the cluster knows
// are tested with the coordinator (internal/txn, owner_test.go).
func TestTxnEndNeedsItsOwner(t *testing.T) {
	tc, _, c, ctx := stillCluster(t)
	s := tc.nodes[0]
	id, token := []byte("0123456789abcdef"), []byte("owner-token-0001")
	meta := func(tok []byte) *tidekvpb.TxnMeta {
		return &tidekvpb.TxnMeta{Id: id, ReadTimestamp: tidekvpb.FromHLC(hlc.Timestamp{WallTime: time.Now().UnixNano()}), OwnerToken: tok}
	}
	key := []byte("owned")
	if _, err := s.txn.coord.Write(ctx, meta(token), []*tidekvpb.WriteOp{{Key: key, Value: []byte("mine")}}); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "belongs to another client") {
			t.Errorf("%s: %v; want PERMISSION_DENIED naming another client", what, err)
		}
	}
	for _, tok := range [][]byte{nil, []byte("owner-token-0002")} {
		for _, commit := range []bool{false, true} {
			_, err := s.txn.coord.End(ctx, meta(tok), commit)
			refused("end", err)
			_, err = (&txnService{s: s, coord: s.txn.coord}).End(ctx, &tidekvpb.TxnEndRequest{Txn: meta(tok), Commit: commit,
				Ops: []*tidekvpb.WriteOp{{Key: key, Value: []byte("theirs")}}})
			refused("end with writes", err)
		}
		_, err := s.txn.coord.Get(ctx, meta(tok), key)
		refused("get", err)
	}
	if _, err := s.txn.coord.End(ctx, meta(token), true); err != nil {
		t.Fatalf("the owner's commit after the refusals: %v", err)
	}
	if v, err := c.Get(ctx, key); err != nil || string(v) != "mine" {
		t.Fatalf("%s = %q, %v after the owner's commit; want mine", key, v, err)
	}
}

// A transaction's step at a timestamp more than the maximum offset ahead
// of the node's clock (which no clock within the offset assumption hands
// out) is refused at once as invalid: a read, intents and a one-phase
// commit alike. The node's clock is held, so a step refused as
// unavailable would be retried until the deadline (before the fix it was,
// and once real time caught up it was written). Nothing is written.
func TestTxnBeyondMaxOffsetRefused(t *testing.T) {
	tc, clock, c, ctx := stillCluster(t)
	maxOffset := tc.cfgs[0].Raft.MaxClockOffset
	ahead := hlc.Timestamp{WallTime: clock.Now().UnixNano() + int64(2*maxOffset)}
	key := []byte("ahead-key")
	ops := []*tidekvpb.WriteOp{{Kind: tidekvpb.WriteOp_PUT, Key: key, Value: []byte("v")}}
	id := []byte("ahead-txn")
	steps := map[string]func(context.Context) error{
		"read": func(ctx context.Context) error {
			_, err := c.GetVersion(ctx, key, client.ReadAt(ahead))
			return err
		},
		"write intents": func(ctx context.Context) error {
			_, err := c.WriteIntents(ctx, &tidekvpb.TxnKey{Id: id, Anchor: key}, ahead, ops)
			return err
		},
		"one-phase commit": func(ctx context.Context) error {
			_, err := c.CommitOnePhase(ctx, id, ahead, nil, nil, ops)
			return err
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
	clock.Advance(3 * maxOffset)
	if v, err := c.GetVersion(ctx, key); err != nil || v.Found {
		t.Fatalf("after the refusals, once the clock passed their timestamp: %+v, %v; want nothing written", v, err)
	}
}
