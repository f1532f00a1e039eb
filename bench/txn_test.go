package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// memTxnStore is a TxnStore over a map whose transactions run one at a
// time (so serializable). Every conflictEvery-th transaction meets a
// conflict on its first attempt and runs again, as the client retries;
// with loseLastWrite a commit drops the transaction's last write.
type memTxnStore struct {
	mu            sync.Mutex
	kv            map[string][]byte
	splits        [][]byte
	txns          int
	conflictEvery int
	loseLastWrite bool
}

func newMemTxnStore() *memTxnStore { return &memTxnStore{kv: map[string][]byte{}} }

func (s *memTxnStore) txnCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.txns
}

// handTimers are a run's timers moved by the test: the run ends, and
// the checker checks, when drive says.
type handTimers struct {
	ticks chan time.Time
	end   chan func()
	done  chan struct{}
}

func newHandTimers() *handTimers {
	return &handTimers{ticks: make(chan time.Time), end: make(chan func(), 1), done: make(chan struct{})}
}

func (h *handTimers) afterFunc(_ time.Duration, f func()) func() bool {
	h.end <- f
	return func() bool { return true }
}

func (h *handTimers) ticker(time.Duration) (<-chan time.Time, func()) { return h.ticks, func() {} }

// drive lets the run commit until s has seen txns more transactions,
// makes its checker check checks times meanwhile, then ends it. Call
// stop once the run has returned.
func (h *handTimers) drive(s *memTxnStore, checks, txns int) (stop func()) {
	from := s.txnCount()
	go func() {
		end := <-h.end
		for s.txnCount() < from+txns {
			select {
			case <-h.done:
				return
			case <-time.After(time.Millisecond):
			}
		}
		// The ticks are unbuffered: the checks+1st is taken only once
		// the checker has finished the check of the one before. A
		// checker that stopped taking them does not hang the test: the
		// run ends and its count of checks says so.
	ticking:
		for range checks + 1 {
			select {
			case <-h.done:
				return
			case h.ticks <- time.Time{}:
			case <-time.After(10 * time.Second):
				break ticking
			}
		}
		end()
		close(h.ticks) // the checker, waiting for a tick, sees the end
	}()
	return func() { close(h.done) }
}

type memTx struct {
	s      *memTxnStore
	writes [][2][]byte
}

func (tx *memTx) Get(_ context.Context, key []byte) ([]byte, error) {
	for i := len(tx.writes) - 1; i >= 0; i-- {
		if bytes.Equal(tx.writes[i][0], key) {
			return tx.writes[i][1], nil
		}
	}
	v, ok := tx.s.kv[string(key)]
	if !ok {
		return nil, fmt.Errorf("key %q not found", key)
	}
	return v, nil
}

func (tx *memTx) Put(_ context.Context, key, value []byte) error {
	tx.writes = append(tx.writes, [2][]byte{slices.Clone(key), slices.Clone(value)})
	return nil
}

func (s *memTxnStore) Txn(ctx context.Context, fn func(tx TxnOps) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.txns++
	if s.conflictEvery > 0 && s.txns%s.conflictEvery == 0 {
		_ = fn(&memTx{s: s}) // the attempt that meets a conflict; its writes are dropped
	}
	tx := &memTx{s: s}
	if err := fn(tx); err != nil {
		return err
	}
	if s.loseLastWrite {
		tx.writes = tx.writes[:len(tx.writes)-1]
	}
	for _, w := range tx.writes {
		s.kv[string(w[0])] = w[1]
	}
	return nil
}

func (s *memTxnStore) Put(_ context.Context, key, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kv[string(key)] = slices.Clone(value)
	return nil
}

func (s *memTxnStore) Delete(_ context.Context, key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.kv, string(key))
	return nil
}

func (s *memTxnStore) SnapshotScan(_ context.Context, start, end []byte) ([]KeyValue, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []KeyValue
	for k, v := range s.kv {
		if k >= string(start) && k < string(end) {
			out = append(out, KeyValue{Key: []byte(k), Value: v})
		}
	}
	slices.SortFunc(out, func(a, b KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return out, fmt.Sprintf("txn %d", s.txns), nil
}

func (s *memTxnStore) Split(_ context.Context, key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.splits = append(s.splits, slices.Clone(key))
	return nil
}

func quickBank() TxnBenchConfig {
	c := DefaultTxnBenchConfig()
	c.Accounts, c.Workers, c.Duration, c.CheckInterval, c.Seed = 20, 4, 300*time.Millisecond, 20*time.Millisecond, 1
	return c
}

// Bad input is refused in one sentence and nothing runs.
func TestTxnBenchConfigValidate(t *testing.T) {
	for _, c := range []struct {
		change func(*TxnBenchConfig)
		want   string // in the refusal; empty: accepted
	}{
		{func(*TxnBenchConfig) {}, ""},
		{func(c *TxnBenchConfig) { c.Accounts = 1 }, "--accounts"},
		{func(c *TxnBenchConfig) { c.Duration = 0 }, "--duration"},
		{func(c *TxnBenchConfig) { c.Duration = -time.Second }, "--duration"},
		{func(c *TxnBenchConfig) { c.Workload = "ledger" }, `unknown workload "ledger"`},
		{func(c *TxnBenchConfig) { c.Workload = WorkloadTPCCLite }, ""},
		{func(c *TxnBenchConfig) { c.Workload, c.Warehouses = WorkloadTPCCLite, 0 }, "--warehouses"},
		{func(c *TxnBenchConfig) { c.Workload, c.Ranges = WorkloadTPCCLite, 11 }, "--ranges"},
		{func(c *TxnBenchConfig) { c.Workers = 0 }, "--workers"},
		{func(c *TxnBenchConfig) { c.Ranges = 21 }, "--ranges"},
		{func(c *TxnBenchConfig) { c.InitialBalance = -1 }, "--initial-balance"},
		{func(c *TxnBenchConfig) { c.Transactions = -1 }, "--transactions"},
		{func(c *TxnBenchConfig) { c.CheckInterval = 0 }, "--check-interval"},
	} {
		cfg := quickBank()
		c.change(&cfg)
		err := cfg.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v refused: %v", cfg, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: Validate() = %v, want one sentence about %s", cfg, err, c.want)
			continue
		}
		s := newMemTxnStore()
		if res, err := RunTxn(context.Background(), cfg, s, nil); res != nil || err == nil || len(s.kv)+len(s.splits) > 0 {
			t.Errorf("%+v: RunTxn ran (%d keys, %d splits; %v)", cfg, len(s.kv), len(s.splits), err)
		}
	}
}

// Transfers through a serializable store keep the total: every check and
// the end see it; conflicts show up as retries; the accounts are split.
func TestBankKeepsTheTotal(t *testing.T) {
	s := newMemTxnStore()
	s.conflictEvery = 3
	timers := newHandTimers()
	stop := timers.drive(s, 3, 30)
	res, err := runTxn(context.Background(), quickBank(), s, nil, timers)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if !res.InvariantOK || res.InvariantError != "" {
		t.Fatalf("invariant: %v %q", res.InvariantOK, res.InvariantError)
	}
	if res.Committed == 0 || res.Retries == 0 || res.Aborted+res.Errors != 0 || res.InvariantChecks < 3 || res.Stopped != StoppedDuration {
		t.Fatalf("committed %d, retries %d, aborted %d, errors %d, %d checks, stopped %s", res.Committed, res.Retries, res.Aborted, res.Errors, res.InvariantChecks, res.Stopped)
	}
	if want := [][]byte{bankKey(0), bankKey(5), bankKey(10), bankKey(15)}; !slices.EqualFunc(s.splits, want, bytes.Equal) {
		t.Fatalf("splits at %q, want %q", s.splits, want)
	}
	if res.P50Ms <= 0 || res.P99Ms < res.P50Ms || len(res.Timeline) == 0 {
		t.Fatalf("p50 %v ms, p99 %v ms, %d timeline points", res.P50Ms, res.P99Ms, len(res.Timeline))
	}
	var fields map[string]any
	var b bytes.Buffer
	if err := res.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.Bytes(), &fields); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"committed", "aborted", "retries", "p50_ms", "p99_ms", "invariant_ok", "committed_per_sec", "invariant_checks"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("no %q in the JSON report", f)
		}
	}
	if path, err := res.WriteFigure(t.TempDir()); err != nil || !strings.HasSuffix(path, "txn-bank.svg") {
		t.Fatalf("figure %q: %v", path, err)
	}
}

// A store that loses a transaction's last write breaks the total: the
// checker sees it, stops the run and says so.
func TestBankDetectsALostWrite(t *testing.T) {
	s := newMemTxnStore()
	s.loseLastWrite = true
	cfg := quickBank()
	cfg.Duration = 10 * time.Second
	res, err := RunTxn(context.Background(), cfg, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.InvariantOK || !strings.Contains(res.InvariantError, "in total, not 20000") || res.Stopped != StoppedInvariant {
		t.Fatalf("invariant ok %v (%q), stopped %s", res.InvariantOK, res.InvariantError, res.Stopped)
	}
	if res.ElapsedSeconds > 5 {
		t.Fatalf("the run went on for %.1fs after the total broke", res.ElapsedSeconds)
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil || !strings.Contains(table.String(), "invariant: in the snapshot") {
		t.Fatalf("table (%v):\n%s", err, table.String())
	}
}

// --transactions bounds the run by count.
func TestBankStopsAfterTransfers(t *testing.T) {
	cfg := quickBank()
	cfg.Duration, cfg.Transactions = time.Minute, 25
	res, err := RunTxn(context.Background(), cfg, newMemTxnStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != 25 || res.Stopped != StoppedCompleted || !res.InvariantOK {
		t.Fatalf("committed %d, stopped %s, invariant ok %v", res.Committed, res.Stopped, res.InvariantOK)
	}
}

// The invariant on one snapshot: every account, each a number, the total.
func TestCheckBankTotal(t *testing.T) {
	accts := func(vals ...string) []KeyValue {
		var out []KeyValue
		for i, v := range vals {
			out = append(out, KeyValue{Key: bankKey(i), Value: []byte(v)})
		}
		return out
	}
	for _, c := range []struct {
		kvs  []KeyValue
		want string // in the error; empty: none
	}{
		{accts("10", "10", "10"), ""},
		{accts("15", "-5", "20"), ""},
		{accts("10", "10", "11"), "hold 31 in total, not 30"},
		{accts("10", "20"), "holds 2 accounts, not 3"},
		{accts("10", "x", "20"), `holds "x", not a balance`},
	} {
		err := checkBankTotal(c.kvs, "t", 3, 30)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%q: %v, want %q", c.kvs, err, c.want)
		}
	}
}

func quickTPCC() TxnBenchConfig {
	c := quickBank()
	c.Workload = WorkloadTPCCLite
	return c
}

// New-Orders and Payments through a serializable store keep TPC-C's
// consistency conditions; a second run on the same keys starts from
// fresh districts, the earlier run's orders deleted.
func TestTPCCLiteKeepsItsInvariants(t *testing.T) {
	s := newMemTxnStore()
	s.conflictEvery = 5
	for run := range 2 {
		timers := newHandTimers()
		stop := timers.drive(s, 3, 30)
		res, err := runTxn(context.Background(), quickTPCC(), s, nil, timers)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if !res.InvariantOK || res.Committed == 0 || res.Retries == 0 || res.InvariantChecks < 3 {
			t.Fatalf("run %d: invariant ok %v (%q), %d committed, %d retries, %d checks", run, res.InvariantOK, res.InvariantError, res.Committed, res.Retries, res.InvariantChecks)
		}
	}
	if want := [][]byte{tpccWarehouseKey(1), tpccDistrictKey(1, 3), tpccDistrictKey(1, 6), tpccDistrictKey(1, 8)}; !slices.EqualFunc(s.splits[:4], want, bytes.Equal) {
		t.Fatalf("splits at %q, want %q", s.splits[:4], want)
	}
}

// A store that drops a transaction's last write (a Payment's customer, a
// New-Order's order row) breaks a condition, and the checker says which.
func TestTPCCLiteDetectsAPartialTransaction(t *testing.T) {
	s := newMemTxnStore()
	s.loseLastWrite = true
	cfg := quickTPCC()
	cfg.Duration = 10 * time.Second
	res, err := RunTxn(context.Background(), cfg, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.InvariantOK || !strings.Contains(res.InvariantError, "applied in part") || res.Stopped != StoppedInvariant {
		t.Fatalf("invariant ok %v (%q), stopped %s", res.InvariantOK, res.InvariantError, res.Stopped)
	}
}

// Each tpcc-lite invariant on a hand-made snapshot of one warehouse.
func TestTPCCLiteCheck(t *testing.T) {
	tp := tpccLite{warehouses: 1}
	base := func() map[string][]byte {
		m := map[string][]byte{string(tpccWarehouseKey(1)): row(tpccWarehouseYTD + 7)}
		for d := 1; d <= tpccDistricts; d++ {
			m[string(tpccDistrictKey(1, d))] = row(tpccDistrictYTD, 1)
			for c := 1; c <= tpccCustomers; c++ {
				m[string(tpccCustomerKey(1, d, c))] = row(-tpccCustomerYTD, tpccCustomerYTD, 1)
			}
		}
		for i := 1; i <= tpccItems; i++ {
			m[string(tpccStockKey(1, i))] = row(50, 0, 0)
		}
		// One payment of 7 by customer 1 of district 2, one order of 3
		// units of item 4 in district 1.
		m[string(tpccDistrictKey(1, 2))] = row(tpccDistrictYTD+7, 1)
		m[string(tpccCustomerKey(1, 2, 1))] = row(-tpccCustomerYTD-7, tpccCustomerYTD+7, 2)
		m[string(tpccDistrictKey(1, 1))] = row(tpccDistrictYTD, 2)
		m[string(tpccOrderKey(1, 1, 1))] = row(5, 1, 3)
		m[string(tpccStockKey(1, 4))] = row(47, 3, 1)
		return m
	}
	snapshot := func(m map[string][]byte) []KeyValue {
		var out []KeyValue
		for k, v := range m {
			out = append(out, KeyValue{Key: []byte(k), Value: v})
		}
		slices.SortFunc(out, func(a, b KeyValue) int { return bytes.Compare(a.Key, b.Key) })
		return out
	}
	for _, c := range []struct {
		change func(m map[string][]byte)
		want   string // in the error; empty: none
	}{
		{func(map[string][]byte) {}, ""},
		{func(m map[string][]byte) { m[string(tpccWarehouseKey(1))] = row(tpccWarehouseYTD) }, "condition 1"},
		{func(m map[string][]byte) {
			m[string(tpccCustomerKey(1, 2, 1))] = row(-tpccCustomerYTD, tpccCustomerYTD, 1)
		}, "customers paid 0"},
		{func(m map[string][]byte) { m[string(tpccStockKey(1, 4))] = row(50, 0, 0) }, "stock gave 0 units"},
		{func(m map[string][]byte) { m[string(tpccDistrictKey(1, 1))] = row(tpccDistrictYTD, 1) }, "conditions 2 and 3"},
		{func(m map[string][]byte) { delete(m, string(tpccStockKey(1, 9))) }, "999 stock rows"},
		{func(m map[string][]byte) { m[string(tpccCustomerKey(1, 3, 3))] = []byte("1 2") }, "not 3 columns"},
		{func(m map[string][]byte) { m[tpccPrefix+"w0001/x01"] = row(1) }, "not a tpcc-lite row"},
	} {
		m := base()
		c.change(m)
		err := tp.check(snapshot(m), "t")
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}
