package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/raftstore"
)

const (
	bankAccounts = 8
	bankStart    = 100
)

func acct(i int) []byte { return []byte(fmt.Sprintf("acct-%d", i)) }

// startBank starts a 3-node cluster with quick transaction expiry and puts
// the accounts on two ranges, which serve transactions and snapshot scans
// from the start (a new cluster is at the newest log version, its ranges
// versioned); more changes the nodes' configuration further.
func startBank(t testing.TB, more ...func(*Config)) (*testCluster, *client.Client, context.Context) {
	return startBankOn(t, 3, more...)
}

// startBankOn is startBank on n nodes.
func startBankOn(t testing.TB, n int, more ...func(*Config)) (*testCluster, *client.Client, context.Context) {
	tc := startClusterWith(t, n, func(c *Config) {
		c.Txn.HeartbeatInterval = 100 * time.Millisecond
		c.Txn.Expiry = 500 * time.Millisecond
		c.Txn.IntentWait = time.Second
		c.GC.Interval = 200 * time.Millisecond // which sweeps old intents
		for _, m := range more {
			m(c)
		}
	})
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	for i := range bankAccounts {
		if err := c.Put(ctx, acct(i), []byte(strconv.Itoa(bankStart))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Split(ctx, acct(bankAccounts/2)); err != nil {
		t.Fatal(err)
	}
	if err := c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, acct(0), []byte(strconv.Itoa(bankStart))) }); err != nil {
		t.Fatalf("a first transaction: %v", err)
	}
	if total, at, err := bankTotal(ctx, c); err != nil || total != bankAccounts*bankStart {
		t.Fatalf("the total at %s before any transfer: %d, %v; want %d", at, total, err, bankAccounts*bankStart)
	}
	return tc, c, ctx
}

// untilStopped runs n workers, each calling step with its own rand (seeded
// by its number) until stop is closed or step returns false; the
// WaitGroup ends with them.
func untilStopped(n int, stop <-chan struct{}, step func(w int, rng *rand.Rand) bool) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewSource(int64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !step(w, rng) {
					return
				}
			}
		})
	}
	return &wg
}

// transfer moves a random amount between two random accounts in one
// transaction.
func transfer(ctx context.Context, c *client.Client, rng *rand.Rand) error {
	from, to := rng.Intn(bankAccounts), rng.Intn(bankAccounts-1)
	if to >= from {
		to++
	}
	return transferBetween(ctx, c, from, to, 1+rng.Intn(10))
}

func transferBetween(ctx context.Context, c *client.Client, from, to, amt int) error {
	return c.Txn(ctx, func(tx *client.Tx) error { return transferIn(ctx, tx, from, to, amt) })
}

// transferIn reads both balances and writes them moved by amt, in tx.
func transferIn(ctx context.Context, tx *client.Tx, from, to, amt int) error {
	fv, err := tx.Get(ctx, acct(from))
	if err != nil {
		return err
	}
	tv, err := tx.Get(ctx, acct(to))
	if err != nil {
		return err
	}
	f, _ := strconv.Atoi(string(fv))
	g, _ := strconv.Atoi(string(tv))
	if err := tx.Put(ctx, acct(from), []byte(strconv.Itoa(f-amt))); err != nil {
		return err
	}
	return tx.Put(ctx, acct(to), []byte(strconv.Itoa(g+amt)))
}

// bankTotal sums the accounts in one snapshot scan.
func bankTotal(ctx context.Context, c *client.Client) (int, hlc.Timestamp, error) {
	kvs, at, err := c.SnapshotScan(ctx, []byte("acct-"), []byte("acct-z"), 0)
	total, n := sumAccounts(kvs)
	if err == nil && n != bankAccounts {
		err = fmt.Errorf("snapshot scan at %s found %d accounts", at, n)
	}
	return total, at, err
}

// scanTotals checks the accounts' total in snapshot scans, one after
// another while transfers run, for at least 2 s and until enough (at most
// 30 s); it returns the number of scans and the first scan that failed or
// saw another total. A scan told to retry counts as neither.
func scanTotals(ctx context.Context, c *client.Client, want int, enough func() bool) (scans int, failed error) {
	start := time.Now()
	for ; failed == nil && time.Since(start) < 30*time.Second && (time.Since(start) < 2*time.Second || !enough()); scans++ {
		total, at, err := bankTotal(ctx, c)
		switch {
		case errors.Is(err, client.ErrTxnRetry):
		case err != nil:
			failed = err
		case total != want:
			failed = fmt.Errorf("snapshot scan at %s: total %d, want %d", at, total, want)
		}
	}
	return scans, failed
}

// sumAccounts sums the balances among kvs, stepping over the transfer
// markers TestBankUnderFaults keeps beside the accounts (isMarker).
func sumAccounts(kvs []client.KeyValue) (total, n int) {
	for _, kv := range kvs {
		if isMarker(kv.Key) {
			continue
		}
		b, _ := strconv.Atoi(string(kv.Value))
		total += b
		n++
	}
	return total, n
}

// txnCommits sums the transactions the cluster's nodes committed by path.
func txnCommits(tc *testCluster, path string) int {
	n := 0.0
	for _, s := range tc.nodes {
		n += promtest.ToFloat64(s.metrics.TxnCommits.WithLabelValues(path))
	}
	return int(n)
}

// intentsLeft lists the keys holding intents on any node's replicas.
func intentsLeft(tc *testCluster) error {
	for _, s := range tc.nodes {
		for _, r := range s.Store().Replicas() {
			ies, err := r.Intents(10)
			if err != nil {
				return err
			}
			if len(ies) > 0 {
				return fmt.Errorf("node %s, range %d: %d intents, the first %v", s.Addr(), r.RangeID(), len(ies), ies[0])
			}
		}
	}
	return nil
}

// Concurrent transfers between accounts on two ranges: every snapshot scan
// sees the total, and so does the end; no intent outlives the expiry.
func TestBankTransfersKeepTheTotal(t *testing.T) {
	tc, c, ctx := startBank(t)
	const want = bankAccounts * bankStart
	var committed, gaveUp atomic.Int64
	stop := make(chan struct{})
	wg := untilStopped(4, stop, func(_ int, rng *rand.Rand) bool {
		switch err := transfer(ctx, c, rng); {
		case err == nil:
			committed.Add(1)
		case errors.Is(err, client.ErrTxnRetry):
			gaveUp.Add(1)
		default:
			t.Errorf("transfer: %v", err)
			return false
		}
		return true
	})
	// At least 3 s and 20 transfers (a loaded machine needs longer), at
	// most 30 s.
	const minTransfers = 20
	scans, retried := 0, 0
	start := time.Now()
	for ; time.Since(start) < 30*time.Second && (time.Since(start) < 3*time.Second || committed.Load() < minTransfers); scans++ {
		total, at, err := bankTotal(ctx, c)
		switch {
		case errors.Is(err, client.ErrTxnRetry):
			retried++ // waited for a live transaction's intent too long
		case err != nil:
			t.Fatal(err)
		case total != want:
			t.Fatalf("snapshot scan at %s: total %d, want %d", at, total, want)
		}
	}
	close(stop)
	wg.Wait()
	one, two := txnCommits(tc, "one_phase"), txnCommits(tc, "two_phase")
	t.Logf("%d transfers committed (%d in one phase, %d in two), %d gave up; %d snapshot scans, %d waited too long",
		committed.Load(), one, two, gaveUp.Load(), scans, retried)
	if committed.Load() < minTransfers {
		t.Fatalf("only %d transfers committed", committed.Load())
	}
	// Transfers within a range commit in one phase, between the two in two.
	if one == 0 || two == 0 {
		t.Fatalf("commits: %d in one phase, %d in two; want both paths taken", one, two)
	}
	eventually(t, 10*time.Second, "the total, no intents and no records", func() error {
		if total, at, err := bankTotal(ctx, c); err != nil || total != want {
			return fmt.Errorf("total %d at %s, want %d (%v)", total, at, want, err)
		}
		if err := intentsLeft(tc); err != nil {
			return err
		}
		return recordsLeft(tc)
	})
}

// recordsLeft lists the pending or committed transaction records on any
// node's replicas: once its intents are resolved, a finished
// transaction's record is removed. ABORTED records that a push of a
// missing record wrote stay (they keep a late record from being made).
func recordsLeft(tc *testCluster) error {
	for _, s := range tc.nodes {
		for _, r := range s.Store().Replicas() {
			n, err := r.TxnRecords()
			if err != nil || n[tidekvpb.TxnStatus_TXN_PENDING]+n[tidekvpb.TxnStatus_TXN_COMMITTED] > 0 {
				return fmt.Errorf("node %s, range %d: records %v (%v)", s.Addr(), r.RangeID(), n, err)
			}
		}
	}
	return nil
}

// A coordinator that stops heartbeating without committing leaves intents;
// the transactions they block push it once its record expires, remove
// them, and go on; the GC queue's sweep removes the one nobody meets.
func TestDeadCoordinatorsIntentsArePushed(t *testing.T) {
	tc, c, ctx := startBank(t)
	// The dead coordinator: a record, intents on both ranges, then nothing.
	dead := &tidekvpb.TxnKey{Id: []byte("dead-coordinator"), Anchor: acct(0)}
	if _, err := c.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: dead, Op: tidekvpb.TxnRecordOp_TXN_HEARTBEAT}); err != nil {
		t.Fatal(err)
	}
	ops := []*tidekvpb.WriteOp{{Key: acct(0), Value: []byte("0")}, {Key: acct(bankAccounts - 1), Value: []byte("1000")},
		{Key: []byte("untouched"), Value: []byte("x")}}
	if _, err := c.WriteIntents(ctx, dead, c.Now(), ops); err != nil {
		t.Fatal(err)
	}
	if err := intentsLeft(tc); err == nil {
		t.Fatal("no intents after the dead coordinator's writes")
	}
	start := time.Now()
	err := c.Txn(ctx, func(tx *client.Tx) error {
		v, err := tx.Get(ctx, acct(0))
		if err != nil {
			return err
		}
		if string(v) != strconv.Itoa(bankStart) {
			return fmt.Errorf("acct-0 = %q: the dead transaction's write shows", v)
		}
		return tx.Put(ctx, acct(bankAccounts-1), []byte(strconv.Itoa(bankStart)))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the blocked transaction committed after %v", time.Since(start).Round(time.Millisecond))
	rec, err := c.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: dead, Op: tidekvpb.TxnRecordOp_TXN_PUSH, ExpiryMs: 1})
	if err != nil || rec.GetStatus() != tidekvpb.TxnStatus_TXN_ABORTED {
		t.Fatalf("the dead transaction's record: %v, %v; want ABORTED", rec.GetStatus(), err)
	}
	// acct-0's intent was resolved by the read, acct-7's by the write; the
	// sweep finds the untouched key's.
	eventually(t, 5*time.Second, "no intents", func() error { return intentsLeft(tc) })
	if _, err := c.Get(ctx, []byte("untouched")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("the dead transaction's untouched key: %v, want not found", err)
	}
}

// A transaction over its key limit is refused with one sentence and rolled
// back: nothing it wrote stays, and it is not retried.
func TestTxnLimitsRollBack(t *testing.T) {
	tc := startClusterWith(t, 1, func(c *Config) { c.Txn.MaxKeys = 3 })
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, []byte("k0"), []byte("v")) }); err != nil {
		t.Fatalf("a first transaction: %v", err)
	}
	attempts := 0
	err := c.Txn(ctx, func(tx *client.Tx) error {
		attempts++
		for i := range 4 {
			if err := tx.Put(ctx, []byte(fmt.Sprintf("k%d", i)), []byte("new")); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "over its limits of 3 keys") || attempts != 1 {
		t.Fatalf("4 keys past a limit of 3: %v after %d attempts; want one refusal", err, attempts)
	}
	if err := intentsLeft(tc); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if v, err := c.Get(ctx, []byte(fmt.Sprintf("k%d", i))); (i == 0 && string(v) != "v") || (i > 0 && !errors.Is(err, client.ErrNotFound)) {
			t.Errorf("k%d = %q, %v after the refused transaction", i, v, err)
		}
	}
}

// A plain write that meets a live transaction's intent waits for it, up to
// IntentWait, and then fails with a retryable error; once the transaction
// commits the write goes through on top of it.
func TestWriteWaitsForALiveTransaction(t *testing.T) {
	tc := startClusterWith(t, 1, func(c *Config) { c.Txn.IntentWait = 300 * time.Millisecond })
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, []byte("k"), []byte("0")) }); err != nil {
		t.Fatalf("a first transaction: %v", err)
	}
	// A transaction in the middle of a two-phase commit: its record,
	// heartbeat while the put waits, and its intent on k.
	live := &tidekvpb.TxnKey{Id: []byte("live"), Anchor: []byte("k")}
	heartbeat := func() error {
		_, err := c.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: live, Op: tidekvpb.TxnRecordOp_TXN_HEARTBEAT})
		return err
	}
	if err := heartbeat(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteIntents(ctx, live, c.Now(), []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("txn")}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				_ = heartbeat()
			}
		}
	}()
	start := time.Now()
	err := c.Put(ctx, []byte("k"), []byte("plain"))
	waited := time.Since(start)
	close(stop)
	<-beating
	if !errors.Is(err, client.ErrTxnRetry) || !strings.Contains(err.Error(), "still running after a wait of 300ms: retry") || waited < 250*time.Millisecond {
		t.Fatalf("a put under a live intent: %v after %v; want a retryable refusal after about 300ms", err, waited)
	}
	commitTS := c.Now()
	if rec, err := c.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: live, Op: tidekvpb.TxnRecordOp_TXN_COMMIT, CommitTimestamp: tidekvpb.FromHLC(commitTS)}); err != nil || rec.GetStatus() != tidekvpb.TxnStatus_TXN_COMMITTED {
		t.Fatalf("committing the live transaction: %v, %v", rec.GetStatus(), err)
	}
	eventually(t, 5*time.Second, "the put after the commit", func() error { return c.Put(ctx, []byte("k"), []byte("plain")) })
	if v, err := c.Get(ctx, []byte("k")); err != nil || string(v) != "plain" {
		t.Fatalf("k = %q, %v", v, err)
	}
}

// A cluster whose nodes apply log version 6 at most refuses transactions
// with one sentence, and nothing of them is written.
func TestTxnRefusedBelowLogVersion7(t *testing.T) {
	tc := startClusterWith(t, 1, func(c *Config) { c.Raft.MaxLogVersion = raftstore.LogVersionKeySpaces })
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eventually(t, 10*time.Second, "a plain write", func() error { return c.Put(ctx, []byte("k"), []byte("v")) })
	const want = "transaction commit: the cluster has not finished upgrading: a transaction needs log version 7 on every node, and this node has learnt 6 (a node still runs an older binary?)"
	eventually(t, 10*time.Second, "the refusal at version 6", func() error {
		if err := c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, []byte("k"), []byte("txn")) }); err == nil || err.Error() != want {
			return fmt.Errorf("a transaction at log version 6: %v", err)
		}
		return nil
	})
	if v, err := c.Get(ctx, []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("k = %q, %v after the refused transaction", v, err)
	}
}

// A refreshing heartbeat over the API never makes a missing record, on
// every replica, once the cluster is at log version 14; a cluster whose
// binaries stop at 13 makes it, as a binary at 13 would (the field is not
// proposed there).
func TestRefreshingHeartbeatMakesNoRecord(t *testing.T) {
	for _, tt := range []struct {
		version uint32
		want    int // PENDING records after the refresh
	}{{raftstore.LogVersionHeartbeatRefresh, 0}, {raftstore.LogVersionHeartbeatRefresh - 1, 1}} {
		t.Run(fmt.Sprintf("log version %d", tt.version), func(t *testing.T) {
			tc := startClusterWith(t, 3, func(c *Config) { c.Raft.MaxLogVersion = tt.version })
			c := tc.client()
			tc.waitReplicated(c, 3)
			tc.waitLogVersion(t, tt.version)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil { // the range's layout is versioned from here
				t.Fatal(err)
			}
			ghost := &tidekvpb.TxnKey{Id: []byte("ended-and-forgotten"), Anchor: []byte("k")}
			_, err := c.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: ghost, Op: tidekvpb.TxnRecordOp_TXN_HEARTBEAT, Refresh: true})
			if (err == nil) != (tt.want == 1) {
				t.Fatalf("refresh of a missing record: %v", err)
			}
			// Every replica applies what the leaseholder has applied (the
			// refresh among it) before its records are counted.
			rangeID := tc.nodes[0].Store().LookupKey([]byte("k")).RangeID()
			for _, s := range tc.nodes {
				tc.waitMember(t, s.NodeID(), rangeID)
			}
			for _, s := range tc.nodes {
				n, err := s.Store().LookupKey([]byte("k")).TxnRecords()
				if err != nil || n[tidekvpb.TxnStatus_TXN_PENDING] != tt.want {
					t.Errorf("node %s: records %v (%v), want %d PENDING", s.Addr(), n, err, tt.want)
				}
			}
		})
	}
}
