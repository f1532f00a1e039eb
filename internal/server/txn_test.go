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

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/hlc"
	"github.com/tidekv/tidekv/internal/raftstore"
)

const (
	bankAccounts = 8
	bankStart    = 100
)

func acct(i int) []byte { return []byte(fmt.Sprintf("acct-%d", i)) }

// startBank starts a 3-node cluster with quick transaction expiry, puts
// the accounts on two ranges and waits until transactions are accepted
// (log version 7 on every node, both ranges versioned); more changes the
// nodes' configuration further.
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
	eventually(t, 20*time.Second, "a first transaction", func() error {
		return c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, acct(0), []byte(strconv.Itoa(bankStart))) })
	})
	eventually(t, 10*time.Second, "both ranges readable at a timestamp", func() error {
		_, _, err := bankTotal(ctx, c)
		return err
	})
	return tc, c, ctx
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
		n += promtest.ToFloat64(s.metrics.txnCommits.WithLabelValues(path))
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
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch err := transfer(ctx, c, rng); {
				case err == nil:
					committed.Add(1)
				case errors.Is(err, client.ErrTxnRetry):
					gaveUp.Add(1)
				default:
					t.Errorf("transfer: %v", err)
					return
				}
			}
		}()
	}
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
	eventually(t, 20*time.Second, "a first transaction", func() error {
		return c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, []byte("k0"), []byte("v")) })
	})
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
	eventually(t, 20*time.Second, "a first transaction", func() error {
		return c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, []byte("k"), []byte("0")) })
	})
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

// BenchmarkTxnTransfer measures one transfer transaction at a time (two
// reads and two writes on two ranges of a 3-node cluster, commit with
// refresh), from the Go client's Txn to its answer; intents are resolved
// after it.
// A transfer's own reads of the keys it writes do not push its writes
// above its read timestamp: one after another, two-phase transfers commit
// at their read timestamp without refreshing their reads.
func TestOwnReadsDoNotPushWrites(t *testing.T) {
	tc, c, ctx := startBank(t)
	before := promtest.ToFloat64(tc.nodes[0].metrics.txnRefreshes)
	for _, s := range tc.nodes[1:] {
		before += promtest.ToFloat64(s.metrics.txnRefreshes)
	}
	const n = 20
	for range n {
		if err := transferBetween(ctx, c, 0, bankAccounts-1, 1); err != nil {
			t.Fatal(err)
		}
	}
	after := 0.0
	for _, s := range tc.nodes {
		after += promtest.ToFloat64(s.metrics.txnRefreshes)
	}
	// A closed timestamp can still push one that stays open past it.
	if refreshed := int(after - before); refreshed > n/4 {
		t.Fatalf("%d of %d transfers refreshed their reads", refreshed, n)
	}
}

// BenchmarkTxnTransfer runs one transfer at a time between two accounts of
// one range (a one-phase commit) or of the two ranges (two phases).
func BenchmarkTxnTransfer(b *testing.B) {
	_, c, ctx := startBank(b)
	for _, bc := range []struct {
		name     string
		from, to int
	}{{"one-range", 0, 1}, {"two-ranges", 0, bankAccounts - 1}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := transferBetween(ctx, c, bc.from, bc.to, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The same two keys written without a transaction, and by one that
	// only writes: what a one-range transaction costs over a plain write.
	ops := []client.Op{{Key: acct(0), Value: []byte("100")}, {Key: acct(1), Value: []byte("100")}}
	b.Run("plain-write", func(b *testing.B) {
		for b.Loop() {
			if err := c.Write(ctx, ops); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-range-blind", func(b *testing.B) {
		for b.Loop() {
			err := c.Txn(ctx, func(tx *client.Tx) error {
				for _, op := range ops {
					if err := tx.Put(ctx, op.Key, op.Value); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// One-shot transactions: the branch the compares choose runs atomically
// across ranges, the other leaves nothing; compare-and-increment from
// several workers loses no increment.
func TestTxnIf(t *testing.T) {
	_, c, ctx := startBank(t)
	start := []byte(strconv.Itoa(bankStart))
	move := client.Branch{Ops: []client.Op{{Key: acct(0), Value: []byte("90")}, {Key: acct(bankAccounts - 1), Value: []byte("110")}}}
	orRead := client.Branch{Reads: [][]byte{acct(0), []byte("absent")}}
	for i, want := range []bool{true, false} {
		res, err := c.TxnIf(ctx, []client.Compare{{Key: acct(0), Op: client.Equal, Value: start}}, move, orRead)
		if err != nil || res.Succeeded != want {
			t.Fatalf("call %d: succeeded %v, %v; want %v", i, res.Succeeded, err, want)
		}
		if !want && (len(res.Reads) != 2 || string(res.Reads[0].Value) != "90" || res.Reads[1].Found) {
			t.Fatalf("the else branch's reads: %+v", res.Reads)
		}
	}
	if total, _, err := bankTotal(ctx, c); err != nil || total != bankAccounts*bankStart {
		t.Fatalf("total %d, %v after the moves", total, err)
	}
	// Create if absent, then not again.
	create := client.Branch{Ops: []client.Op{{Key: []byte("ctr"), Value: []byte("0")}}}
	for i, want := range []bool{true, false} {
		res, err := c.TxnIf(ctx, []client.Compare{{Key: []byte("ctr"), Op: client.NotExists}}, create, client.Branch{})
		if err != nil || res.Succeeded != want {
			t.Fatalf("create %d: succeeded %v, %v; want %v", i, res.Succeeded, err, want)
		}
	}
	var wg sync.WaitGroup
	var done atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				v, err := c.Get(ctx, []byte("ctr"))
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := strconv.Atoi(string(v))
				res, err := c.TxnIf(ctx, []client.Compare{{Key: []byte("ctr"), Op: client.Equal, Value: v}},
					client.Branch{Ops: []client.Op{{Key: []byte("ctr"), Value: []byte(strconv.Itoa(n + 1))}}}, client.Branch{})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Succeeded {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if v, err := c.Get(ctx, []byte("ctr")); err != nil || string(v) != strconv.Itoa(int(done.Load())) {
		t.Fatalf("ctr = %q, %v after %d successful increments", v, err, done.Load())
	}
	t.Logf("%d of 40 compare-and-increments succeeded", done.Load())
	_, err := c.TxnIf(ctx, nil, create, client.Branch{})
	if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "needs 1 or more compares") {
		t.Fatalf("no compares: %v", err)
	}
}

// Scans in a transaction see its own writes, and a key that appears in a
// scanned span before the commit makes it run again: on two ranges (two
// phases, the span refreshed range by range) and within one (one phase).
func TestTxnScan(t *testing.T) {
	tc, c, ctx := startBank(t)
	err := c.Txn(ctx, func(tx *client.Tx) error {
		if err := tx.Put(ctx, []byte("acct-9"), []byte("5")); err != nil {
			return err
		}
		if err := tx.Delete(ctx, acct(1)); err != nil {
			return err
		}
		kvs, err := tx.Scan(ctx, []byte("acct-"), []byte("acct-z"), 0)
		if err != nil {
			return err
		}
		var got []string
		for _, kv := range kvs {
			got = append(got, string(kv.Key)+"="+string(kv.Value))
		}
		if want := "acct-0=100 acct-2=100 acct-3=100 acct-4=100 acct-5=100 acct-6=100 acct-7=100 acct-9=5"; strings.Join(got, " ") != want {
			return fmt.Errorf("scan with the transaction's writes: %s, want %s", strings.Join(got, " "), want)
		}
		if kvs, err = tx.Scan(ctx, []byte("acct-"), nil, 2); err != nil || len(kvs) != 2 || string(kvs[1].Key) != "acct-2" {
			return fmt.Errorf("scan limited to 2: %v, %v", kvs, err)
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatal(err)
	}
	for _, sc := range []struct {
		name, start, end, phantom, sum, path string
	}{
		{"two ranges", "acct-", "acct-z", "acct-8", "sum", "two_phase"},
		{"one range", "acct-0", "acct-3z", "acct-1x", "acct-3z", "one_phase"},
	} {
		commits := txnCommits(tc, sc.path)
		attempts := 0
		err := c.Txn(ctx, func(tx *client.Tx) error {
			attempts++
			kvs, err := tx.Scan(ctx, []byte(sc.start), []byte(sc.end), 0)
			if err != nil {
				return err
			}
			total := 0
			for _, kv := range kvs {
				n, _ := strconv.Atoi(string(kv.Value))
				total += n
			}
			if attempts == 1 {
				// Another client adds a key to the span meanwhile, and
				// reads the sum at its clock's now, so that the transaction
				// commits after the new key (else it may commit below it,
				// serialized before it, which is no phantom).
				if err := c.Put(ctx, []byte(sc.phantom), []byte("100")); err != nil {
					return err
				}
				if _, err := c.Get(ctx, []byte(sc.sum), client.ReadAt(c.Now())); err != nil && !errors.Is(err, client.ErrNotFound) {
					return err
				}
			}
			return tx.Put(ctx, []byte(sc.sum), []byte(strconv.Itoa(total)))
		})
		if err != nil {
			t.Fatalf("%s: %v", sc.name, err)
		}
		kvs, err := c.Scan(ctx, []byte(sc.start), []byte(sc.end), 0)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, kv := range kvs {
			n, _ := strconv.Atoi(string(kv.Value))
			want += n
		}
		if v, err := c.Get(ctx, []byte(sc.sum)); err != nil || string(v) != strconv.Itoa(want) || attempts < 2 {
			t.Fatalf("%s: the sum written is %q (%v) after %d attempts; the span holds %d: the new key was missed", sc.name, v, err, attempts, want)
		}
		if n := txnCommits(tc, sc.path); n != commits+1 {
			t.Errorf("%s: %d commits in %s, want 1", sc.name, n-commits, sc.path)
		}
	}
}

// Two committing transactions that need each other's keys do not wait for
// each other: the one that meets the other's live intent gives up after
// one push, well before the intent wait, and its client runs it again.
func TestCommittingTransactionsDoNotWaitForEachOther(t *testing.T) {
	_, c, ctx := startBank(t)
	t1 := &tidekvpb.TxnKey{Id: []byte("t1"), Anchor: acct(0)}
	t2 := &tidekvpb.TxnKey{Id: []byte("t2"), Anchor: acct(bankAccounts - 1)}
	for _, txn := range []*tidekvpb.TxnKey{t1, t2} {
		if _, err := c.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: txn, Op: tidekvpb.TxnRecordOp_TXN_HEARTBEAT}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteIntents(ctx, txn, c.Now(), []*tidekvpb.WriteOp{{Key: txn.GetAnchor(), Value: []byte("0")}}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err := c.WriteIntents(ctx, t1, c.Now(), []*tidekvpb.WriteOp{{Key: t2.GetAnchor(), Value: []byte("0")}})
	if took := time.Since(start); !errors.Is(err, client.ErrTxnRetry) || !strings.Contains(err.Error(), "does not wait") || took > 500*time.Millisecond {
		// Waiting, it would have pushed t2 again until t2 expired (500 ms)
		// and then written.
		t.Fatalf("a committing transaction's write under another's live intent: %v after %v; want a retry at once (the intent wait is 1s)", err, took)
	}
}

// Transactions' puts may expire, in one phase and in two (the intent
// carries the expiry into the committed value); keeping a TTL is refused.
func TestTxnTTL(t *testing.T) {
	_, c, ctx := startBank(t)
	for _, keys := range [][]string{{"acct-0x", "acct-1x"}, {"acct-0y", "acct-7y"}} {
		err := c.Txn(ctx, func(tx *client.Tx) error {
			for _, k := range keys {
				if err := tx.PutExpiring(ctx, []byte(k), []byte("v"), client.Expiry{TTL: 800 * time.Millisecond}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if ttl, err := c.TTL(ctx, []byte(k)); err != nil || ttl <= 0 || ttl > 800*time.Millisecond {
				t.Fatalf("%s after the transaction: TTL %v, %v; want up to 800ms", k, ttl, err)
			}
		}
	}
	time.Sleep(time.Second)
	for _, k := range []string{"acct-0x", "acct-1x", "acct-0y", "acct-7y"} {
		if _, err := c.Get(ctx, []byte(k)); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s after its TTL: %v, want not found", k, err)
		}
	}
	err := c.Txn(ctx, func(tx *client.Tx) error {
		return tx.PutExpiring(ctx, acct(0), []byte("1"), client.Expiry{Keep: true})
	})
	if !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("keeping a TTL in a transaction: %v, want a refusal", err)
	}
}
