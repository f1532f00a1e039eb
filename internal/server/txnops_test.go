package server

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

// Transactions' commit paths and operations beyond get and put: the
// one-phase commit against a plain write, reads that do not push their
// own writes, committing transactions that do not wait for each other,
// one-shot If/Then/Else, scans and TTLs.

// BenchmarkTxnTransfer measures one transfer transaction at a time (two
// reads and two writes on two ranges of a 3-node cluster, commit with
// refresh), from the Go client's Txn to its answer; intents are resolved
// after it.
// A transfer's own reads of the keys it writes do not push its writes
// above its read timestamp: one after another, two-phase transfers commit
// at their read timestamp without refreshing their reads. Closed
// timestamps, which push a write that stays open past one (any transfer
// on a busy machine, whose commit outlasts their 100 ms interval), are not
// published here, and no lease moves (control rounds held): a new lease
// raises its range's low-water mark ahead of the clock (leaseLowWater),
// which the first transfer's write on a range the split just made does
// meet; commit wait holds its answer until the clock has passed it. What
// remains to push the writes after it is their own reads.
func TestOwnReadsDoNotPushWrites(t *testing.T) {
	tc, c, ctx := startBank(t, func(c *Config) { c.ClosedTimestampInterval = time.Hour })
	defer tc.holdControl()()
	if err := transferBetween(ctx, c, 0, bankAccounts-1, 1); err != nil {
		t.Fatal(err)
	}
	before := promtest.ToFloat64(tc.nodes[0].metrics.TxnRefreshes)
	for _, s := range tc.nodes[1:] {
		before += promtest.ToFloat64(s.metrics.TxnRefreshes)
	}
	const n = 20
	for range n {
		if err := transferBetween(ctx, c, 0, bankAccounts-1, 1); err != nil {
			t.Fatal(err)
		}
	}
	after := 0.0
	for _, s := range tc.nodes {
		after += promtest.ToFloat64(s.metrics.TxnRefreshes)
	}
	if refreshed := int(after - before); refreshed > 0 {
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
// several workers loses no increment. Every range has its three voters
// and control rounds are held before the calls: a replica change under
// way (the split's range still gaining its third voter, or placement
// moving one) leaves a two-voter range whose leader steps down when one
// follower is busy with a snapshot, and a call in flight then has an
// ambiguous result, which this test does not count with.
func TestTxnIf(t *testing.T) {
	tc, c, ctx := startBank(t)
	tc.waitReplicated(c, 3)
	defer tc.holdControl()()
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

// A transaction over two ranges that scans a span, has its writes pushed
// above its read timestamp by another client's read and writes inside the
// span on both ranges refreshes the span past its own intents and commits
// the first time (the span refresh once found its own intent, pushed its
// own live record and ran again until it gave up).
func TestTxnScanPushedWriteInsideSpan(t *testing.T) {
	tc, c, ctx := startBank(t)
	refreshes := func() (n float64) {
		for _, s := range tc.nodes {
			n += promtest.ToFloat64(s.metrics.TxnRefreshes)
		}
		return n
	}
	before := refreshes()
	attempts := 0
	err := c.Txn(ctx, func(tx *client.Tx) error {
		attempts++
		if _, err := tx.Scan(ctx, []byte("acct-"), []byte("acct-z"), 0); err != nil {
			return err
		}
		if _, err := c.Get(ctx, acct(1), client.ReadAt(c.Now())); err != nil {
			return err
		}
		if err := tx.Put(ctx, acct(1), []byte("99")); err != nil {
			return err
		}
		return tx.Put(ctx, acct(bankAccounts-1), []byte("101"))
	})
	if err != nil || attempts != 1 {
		t.Fatalf("after %d attempts: %v; want a commit on the first", attempts, err)
	}
	if refreshes() == before {
		t.Fatal("the commit refreshed nothing: the writes were not pushed above the scan")
	}
	for k, want := range map[int]string{1: "99", bankAccounts - 1: "101"} {
		if v, err := c.Get(ctx, acct(k)); err != nil || string(v) != want {
			t.Errorf("%s = %q, %v; want %s", acct(k), v, err, want)
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
	// The refusal saying it does not wait comes from the one path that
	// refuses after the first push, before any pause (txn.Wait.pause).
	// Waiting, it would have pushed t2 again until t2 expired (500 ms)
	// and then written. (The write used to be timed against 500 ms as
	// well, which a replicated write on a loaded machine can exceed.)
	_, err := c.WriteIntents(ctx, t1, c.Now(), []*tidekvpb.WriteOp{{Key: t2.GetAnchor(), Value: []byte("0")}})
	if !errors.Is(err, client.ErrTxnRetry) || !strings.Contains(err.Error(), "does not wait") {
		t.Fatalf("a committing transaction's write under another's live intent: %v; want a retry at once (the intent wait is 1s)", err)
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

// A transaction's scan with no limit reads its whole span however many
// passes of the node's scan limit that takes, and one whose answer would
// go over the transaction's key limit is refused rather than cut short
// (KEYS and DBSIZE in MULTI/EXEC undercounted past the node's limit).
func TestTxnScanPastNodeScanLimit(t *testing.T) {
	_, c, ctx := startBank(t, func(cfg *Config) {
		cfg.Limits.MaxScanLimit = 3
		cfg.Txn.MaxKeys = 12
	})
	for i := range 14 {
		if err := c.Put(ctx, fmt.Appendf(nil, "many-%02d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	scan := func(end string) (n int, err error) {
		err = c.Txn(ctx, func(tx *client.Tx) error {
			kvs, err := tx.Scan(ctx, []byte("many-"), []byte(end), 0)
			n = len(kvs)
			return err
		})
		return n, err
	}
	if n, err := scan("many-09z"); err != nil || n != 10 {
		t.Fatalf("unlimited scan of 10 keys with a node scan limit of 3: %d keys, %v", n, err)
	}
	if n, err := scan("many-z"); !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "over its limit of 12 keys") {
		t.Fatalf("unlimited scan past the transaction's key limit: %d keys, %v; want it refused", n, err)
	}
}
