package raftstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

// Below log version 7 every transaction operation is refused, with one
// sentence, before anything is proposed.
func TestTransactionsNeedLogVersion7(t *testing.T) {
	tc := newTestCluster(t, 1, func(c *Config) { c.InitialLogVersion = LogVersionKeySpaces })
	tc.migrate(t, testRangeID)
	r := tc.leader(testRangeID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ref := &tidekvpb.TxnRef{Id: []byte("T"), Anchor: []byte("a")}
	_, err := r.WriteIntents(ctx, ref, r.store.hlc.Now(), []*tidekvpb.WriteOp{{Key: []byte("a"), Value: []byte("1")}})
	if !errors.Is(err, ErrLogVersion) || !strings.Contains(err.Error(), "a transaction needs log version 7") {
		t.Fatalf("intents at version 6: %v", err)
	}
	if _, err := r.HeartbeatTxn(ctx, ref, false); !errors.Is(err, ErrLogVersion) {
		t.Fatalf("heartbeat at version 6: %v", err)
	}
	if err := r.ResolveIntents(ctx, ref, [][]byte{[]byte("a")}, tidekvpb.TxnStatus_TXN_ABORTED, hlc.Timestamp{}); !errors.Is(err, ErrLogVersion) {
		t.Fatalf("resolve at version 6: %v", err)
	}
	if v, ok, err := r.Get(ctx, []byte("a"), ReadOptions{}); err != nil || ok {
		t.Fatalf("after refusals a = %q, %v, %v; want nothing written", v, ok, err)
	}
}

// Below log version 14 a refreshing heartbeat is proposed as a creating
// one (a replica at 13 would ignore the field and create the record where
// the others would not); from 14 it leaves a missing record missing.
func TestHeartbeatRefreshNeedsLogVersion14(t *testing.T) {
	tc := newTestCluster(t, 1, func(c *Config) { c.InitialLogVersion = LogVersionSetPositions })
	tc.migrate(t, testRangeID)
	r := tc.leader(testRangeID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	old := &tidekvpb.TxnRef{Id: []byte("T13"), Anchor: []byte("a")}
	if rec, err := r.HeartbeatTxn(ctx, old, true); err != nil || rec.GetStatus() != tidekvpb.TxnStatus_TXN_PENDING {
		t.Fatalf("refresh of a missing record at version 13 = %v, %v; want it created PENDING, as a binary at 13 does", rec, err)
	}
	if err := r.store.RaiseLogVersion(LogVersionHeartbeatRefresh); err != nil {
		t.Fatal(err)
	}
	missing := &tidekvpb.TxnRef{Id: []byte("T14"), Anchor: []byte("a")}
	var se *TxnStatusError
	if _, err := r.HeartbeatTxn(ctx, missing, true); !errors.As(err, &se) || se.Found {
		t.Fatalf("refresh of a missing record at version 14: %v; want no record", err)
	}
	recs, err := r.TxnRecords()
	if err != nil || recs[tidekvpb.TxnStatus_TXN_PENDING] != 1 {
		t.Fatalf("records %v, %v; want only T13's, PENDING", recs, err)
	}
}

// A request whose caller has given up is not proposed: a creating
// heartbeat whose attempt timed out, retried and answered, must not apply
// after the transaction ended and its record was removed.
func TestGivenUpHeartbeatIsNotProposed(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.migrate(t, testRangeID)
	r := tc.leader(testRangeID)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ref := &tidekvpb.TxnRef{Id: []byte("T"), Anchor: []byte("a")}
	if _, err := r.HeartbeatTxn(ctx, ref, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("heartbeat with its context done: %v, want it refused (context canceled)", err)
	}
	// A later write applies after anything the refused one could have.
	tc.put("b", "1")
	if recs, err := r.TxnRecords(); err != nil || len(recs) != 0 {
		t.Fatalf("records %v, %v; want none", recs, err)
	}
}

// The record's rules, step by step: what each operation makes of a record
// at a given "now" (the command's timestamp).
func TestRecordTransitions(t *testing.T) {
	ref := &tidekvpb.TxnRef{Id: []byte("T"), Anchor: []byte("a")}
	at := func(wall int64) hlc.Timestamp { return hlc.Timestamp{WallTime: wall} }
	pending := &tidekvpb.TxnRecord{Txn: ref, HeartbeatWallNanos: 100}
	aborted := &tidekvpb.TxnRecord{Txn: ref, Status: tidekvpb.TxnStatus_TXN_ABORTED, HeartbeatWallNanos: 100}
	committed := &tidekvpb.TxnRecord{Txn: ref, Status: tidekvpb.TxnStatus_TXN_COMMITTED, CommitTimestamp: logTimestamp(at(150))}
	op := func(o tidekvpb.TxnCommand_Op) *tidekvpb.TxnCommand { return &tidekvpb.TxnCommand{Op: o, Txn: ref} }
	push := func(expiry int64) *tidekvpb.TxnCommand {
		c := op(tidekvpb.TxnCommand_PUSH)
		c.ExpiryNanos = expiry
		return c
	}
	end := func(s tidekvpb.TxnStatus, commit int64) *tidekvpb.TxnCommand {
		c := op(tidekvpb.TxnCommand_END)
		c.Status = s
		if commit != 0 {
			c.CommitTimestamp = logTimestamp(at(commit))
		}
		return c
	}
	refresh := &tidekvpb.TxnCommand{Op: tidekvpb.TxnCommand_HEARTBEAT, Txn: ref, Refresh: true}
	for _, tc := range []struct {
		name  string
		rec   *tidekvpb.TxnRecord // nil: absent
		cmd   *tidekvpb.TxnCommand
		now   int64
		want  string // status after ("unchanged" when nothing is written) or the error
		beats int64  // the heartbeat after, when written
	}{
		{"heartbeat creates", nil, op(tidekvpb.TxnCommand_HEARTBEAT), 100, "TXN_PENDING", 100},
		{"heartbeat refreshes", pending, op(tidekvpb.TxnCommand_HEARTBEAT), 200, "TXN_PENDING", 200},
		{"heartbeat never goes back", pending, op(tidekvpb.TxnCommand_HEARTBEAT), 50, "TXN_PENDING", 100},
		{"heartbeat of an aborted one", aborted, op(tidekvpb.TxnCommand_HEARTBEAT), 200, "unchanged", 0},
		{"refresh of a live one", pending, refresh, 200, "TXN_PENDING", 200},
		{"refresh of an aborted one", aborted, refresh, 200, "unchanged", 0},
		{"refresh of a missing one", nil, refresh, 200, "error: transaction 54 has no record at \"a\": it never started or was cleaned up", 0},
		{"push of a live one", pending, push(50), 150, "unchanged", 0},
		{"push at exactly the expiry", pending, push(50), 150, "unchanged", 0},
		{"push of an expired one", pending, push(50), 151, "TXN_ABORTED", 100},
		{"push of a missing one", nil, push(50), 151, "TXN_ABORTED", 0},
		{"push of a committed one", committed, push(1), 1000, "unchanged", 0},
		{"push without expiry", pending, push(0), 151, "error: invalid request: a push needs a positive expiry", 0},
		{"commit", pending, end(tidekvpb.TxnStatus_TXN_COMMITTED, 120), 130, "TXN_COMMITTED", 100},
		{"commit without timestamp", pending, end(tidekvpb.TxnStatus_TXN_COMMITTED, 0), 130, "error: invalid request: ending a transaction needs a final status, and a commit its timestamp", 0},
		{"commit of an aborted one", aborted, end(tidekvpb.TxnStatus_TXN_COMMITTED, 120), 130, "error: transaction 54 is TXN_ABORTED already (an expired transaction is aborted by the first one it blocks)", 0},
		{"commit of a missing one", nil, end(tidekvpb.TxnStatus_TXN_COMMITTED, 120), 130, "error: transaction 54 has no record at \"a\": it never started or was cleaned up", 0},
		{"abort of a committed one", committed, end(tidekvpb.TxnStatus_TXN_ABORTED, 0), 130, "error: transaction 54 is TXN_COMMITTED already (an expired transaction is aborted by the first one it blocks)", 0},
		{"commit twice", committed, end(tidekvpb.TxnStatus_TXN_COMMITTED, 160), 170, "unchanged", 0},
		{"abort of a missing one", nil, end(tidekvpb.TxnStatus_TXN_ABORTED, 0), 130, "TXN_ABORTED", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.rec
			if rec == nil {
				rec = &tidekvpb.TxnRecord{}
			}
			next, err := recordTransition(rec, tc.rec != nil, tc.cmd, at(tc.now))
			got := "unchanged"
			switch {
			case err != nil:
				got = "error: " + err.Error()
			case next != nil:
				got = next.GetStatus().String()
				if next.GetHeartbeatWallNanos() != tc.beats {
					t.Errorf("heartbeat %d, want %d", next.GetHeartbeatWallNanos(), tc.beats)
				}
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// A transaction reads its own write even when the write was pushed above
// its read timestamp; another reader at that timestamp does not see it.
func TestTxnReadsItsOwnPushedWrite(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.migrate(t, testRangeID)
	r := tc.leader(testRangeID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tc.put("k", "old")
	readTS := r.store.hlc.Now()
	ref := &tidekvpb.TxnRef{Id: []byte("T"), Anchor: []byte("k")}
	writePushedIntent(ctx, t, r, ref, readTS, "k", "new")
	if v, _, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: readTS, Txn: ref.GetId()}); err != nil || string(v) != "new" {
		t.Fatalf("the transaction reads %q, %v at its read timestamp; want its own write", v, err)
	}
	if v, _, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: readTS}); err != nil || string(v) != "old" {
		t.Fatalf("another reader at %s reads %q, %v; want the old value below the intent", readTS, v, err)
	}
}

// A transaction that scanned a span, wrote inside it and had its write
// pushed refreshes the span past its own intent, as it does a read key;
// another transaction's intent there still fails the refresh. A value it
// read that expires before the commit timestamp fails both refreshes.
func TestRefreshOwnIntentAndExpiry(t *testing.T) {
	_, r, clock, ctx := clockedLeader(t)
	if _, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("e"), Value: []byte("v"), TtlMs: 1000}, {Key: []byte("k"), Value: []byte("old")}}); err != nil {
		t.Fatal(err)
	}
	from := r.store.hlc.Now()
	ref := &tidekvpb.TxnRef{Id: []byte("T"), Anchor: []byte("k")}
	to := writePushedIntent(ctx, t, r, ref, from, "k", "new")
	if _, err := r.RefreshSpan(ctx, []byte("a"), []byte("z"), from, to, ref.GetId()); err != nil {
		t.Errorf("span refresh over the transaction's own intent: %v", err)
	}
	if err := r.RefreshReads(ctx, [][]byte{[]byte("k")}, from, to, ref.GetId()); err != nil {
		t.Errorf("point refresh over the transaction's own intent: %v", err)
	}
	var ie *IntentError
	if _, err := r.RefreshSpan(ctx, []byte("a"), []byte("z"), from, to, []byte("U")); !errors.As(err, &ie) || string(ie.Txn.GetId()) != "T" {
		t.Errorf("another transaction's span refresh over T's intent: %v, want T's intent", err)
	}

	// e, live at from, expires at its write's wall time plus 1 s.
	clock.Advance(time.Second)
	to = r.store.hlc.Now()
	var rc *ReadChangedError
	if err := r.RefreshReads(ctx, [][]byte{[]byte("e")}, from, to, ref.GetId()); !errors.As(err, &rc) || string(rc.Key) != "e" {
		t.Errorf("point refresh past e's expiry: %v, want e changed", err)
	}
	if _, err := r.RefreshSpan(ctx, []byte("a"), []byte("z"), from, to, ref.GetId()); !errors.As(err, &rc) || string(rc.Key) != "e" || !from.Less(rc.At) || to.Less(rc.At) {
		t.Errorf("span refresh past e's expiry: %v, want e changed in (%s, %s]", err, from, to)
	}
}

// clockedLeader starts one store whose clock moves only when the test
// advances it, with the test range's leader and a context bounding the
// test's calls.
func clockedLeader(t *testing.T) (*testCluster, *Replica, *manualclock.Clock, context.Context) {
	t.Helper()
	clock := manualclock.New(time.Unix(1_700_000_000, 0))
	tc := newTestCluster(t, 1, func(c *Config) { c.Clock = clock })
	tc.migrate(t, testRangeID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return tc, tc.leader(testRangeID), clock, ctx
}

// writePushedIntent writes txn's intent setting key to value, pushed above
// its read timestamp readTS by another read of key 5 ms later, and returns
// the timestamp it was written at.
func writePushedIntent(ctx context.Context, t *testing.T, r *Replica, txn *tidekvpb.TxnRef, readTS hlc.Timestamp, key, value string) hlc.Timestamp {
	t.Helper()
	later := hlc.Timestamp{WallTime: readTS.WallTime + int64(5*time.Millisecond)}
	if _, _, err := r.Get(ctx, []byte(key), ReadOptions{Timestamp: later}); err != nil {
		t.Fatal(err)
	}
	wrote, err := r.WriteIntents(ctx, txn, readTS, []*tidekvpb.WriteOp{{Key: []byte(key), Value: []byte(value)}})
	if err != nil || !later.Less(wrote) {
		t.Fatalf("intent written at %s (%v), want above the read at %s", wrote, err, later)
	}
	return wrote
}

// A read with an uncertainty limit fails on a committed version above its
// timestamp and at or below the limit, point and scan alike, and names
// that version's timestamp; one above the limit, or a read without a
// limit, reads below it as before. Another transaction's intent in the
// window is met as one at the read timestamp is.
func TestUncertaintyWindow(t *testing.T) {
	tc, r, clock, ctx := clockedLeader(t)
	tc.put("k", "old")
	readTS := r.store.hlc.Now()
	clock.Advance(100 * time.Millisecond)
	tc.put("k", "new")
	written, err := r.GetValue(ctx, []byte("k"), ReadOptions{Timestamp: r.store.hlc.Now()})
	if err != nil || !readTS.Less(written.Version) {
		t.Fatalf("k's new version at %s (%v), want above %s", written.Version, err, readTS)
	}
	at := func(ms int64) hlc.Timestamp {
		return hlc.Timestamp{WallTime: readTS.WallTime + ms*int64(time.Millisecond)}
	}

	var ue *UncertainReadError
	within := ReadOptions{Timestamp: readTS, UncertaintyLimit: at(250)}
	if _, err := r.GetValue(ctx, []byte("k"), within); !errors.As(err, &ue) || ue.Found != written.Version || string(ue.Key) != "k" {
		t.Errorf("get within the window: %v, want k uncertain at %s", err, written.Version)
	}
	if _, _, err := r.Scan(ctx, []byte("a"), []byte("z"), 10, 1<<20, within); !errors.As(err, &ue) || ue.Found != written.Version || string(ue.Key) != "k" {
		t.Errorf("scan within the window: %v, want k uncertain at %s", err, written.Version)
	}
	if !RetryableTxnError(ue) {
		t.Error("an uncertain read is not a retryable transaction error")
	}
	for _, ro := range []ReadOptions{{Timestamp: readTS, UncertaintyLimit: at(50)}, {Timestamp: readTS}} {
		if v, err := r.GetValue(ctx, []byte("k"), ro); err != nil || string(v.Value) != "old" {
			t.Errorf("get with limit %s: %q, %v; want the old value", ro.UncertaintyLimit, v.Value, err)
		}
		if kvs, _, err := r.Scan(ctx, []byte("a"), []byte("z"), 10, 1<<20, ro); err != nil || len(kvs) != 1 || string(kvs[0].GetValue()) != "old" {
			t.Errorf("scan with limit %s: %v, %v; want k old", ro.UncertaintyLimit, kvs, err)
		}
	}

	ref := &tidekvpb.TxnRef{Id: []byte("T"), Anchor: []byte("i")}
	if _, err := r.WriteIntents(ctx, ref, r.store.hlc.Now(), []*tidekvpb.WriteOp{{Key: []byte("i"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	var ie *IntentError
	if _, err := r.GetValue(ctx, []byte("i"), within); !errors.As(err, &ie) || string(ie.Txn.GetId()) != "T" {
		t.Errorf("get of an intent within the window: %v, want T's intent", err)
	}
	if _, _, err := r.Scan(ctx, []byte("i"), []byte("j"), 10, 1<<20, within); !errors.As(err, &ie) || string(ie.Txn.GetId()) != "T" {
		t.Errorf("scan of an intent within the window: %v, want T's intent", err)
	}
	if v, err := r.GetValue(ctx, []byte("i"), ReadOptions{Timestamp: readTS, UncertaintyLimit: within.UncertaintyLimit, Txn: []byte("T")}); err != nil || string(v.Value) != "v" {
		t.Errorf("T's own read of its intent: %q, %v", v.Value, err)
	}
}
