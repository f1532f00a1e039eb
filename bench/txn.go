package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The transaction benchmark (`tidekv bench txn`, docs/transactions.md step
// 7): workers run a workload's transactions through a TxnStore while a
// checker reads the workload's keys at one timestamp and checks its
// invariants (txnrun.go; the workloads: txnbank.go, txntpcc.go).

// Workloads of TxnBenchConfig.Workload.
const (
	// WorkloadBank transfers random amounts between two random accounts;
	// the invariant is that the accounts' total never changes.
	WorkloadBank = "bank"
	// WorkloadTPCCLite runs TPC-C's New-Order and Payment over
	// warehouses, districts, customers and stock (txntpcc.go); the
	// invariants are TPC-C's consistency conditions that they keep.
	WorkloadTPCCLite = "tpcc-lite"
)

// TxnStore is the transactional surface the benchmark drives.
// Implementations must be safe for concurrent use and must not retain key
// or value slices after a call returns.
type TxnStore interface {
	// Txn runs fn in a serializable transaction and commits it, running
	// fn again after a conflict as the store's client does. An error that
	// wraps ErrTxnConflict means it gave up after conflicts.
	Txn(ctx context.Context, fn func(tx TxnOps) error) error
	// Put writes value under key outside any transaction (the load);
	// Delete removes key (rows an earlier run left).
	Put(ctx context.Context, key, value []byte) error
	Delete(ctx context.Context, key []byte) error
	// SnapshotScan reads every key in [start, end) at one timestamp and
	// returns them in order with that timestamp in printable form.
	SnapshotScan(ctx context.Context, start, end []byte) ([]KeyValue, string, error)
	// Split makes key the first key of a range, if it is not already.
	Split(ctx context.Context, key []byte) error
}

// TxnOps are the operations of one transaction attempt.
type TxnOps interface {
	// Get returns key's value; a missing key is an error.
	Get(ctx context.Context, key []byte) ([]byte, error)
	Put(ctx context.Context, key, value []byte) error
}

// KeyValue is one pair a snapshot scan returned.
type KeyValue struct{ Key, Value []byte }

// ErrTxnConflict marks a transaction the store gave up on after conflicts
// (counted as aborted, not as an error).
var ErrTxnConflict = errors.New("transaction gave up after conflicts")

// TxnBenchConfig describes one transaction benchmark. Start from
// DefaultTxnBenchConfig.
type TxnBenchConfig struct {
	Workload string `json:"workload"`
	// Accounts is how many accounts the bank workload writes, each
	// holding InitialBalance.
	Accounts       int   `json:"accounts"`
	InitialBalance int64 `json:"initial_balance"`
	// Warehouses is the tpcc-lite workload's scale: each has 10
	// districts of 30 customers and stock of 1,000 items.
	Warehouses int `json:"warehouses"`
	// Ranges is how many ranges the workload's keys are split into (at
	// evenly spaced accounts or districts), so that transactions cross
	// ranges.
	Ranges int `json:"ranges"`
	// Workers run transactions concurrently, each one at a time.
	Workers int `json:"workers"`
	// Duration bounds the run; Transactions, if not 0, bounds how many
	// transactions start.
	Duration     time.Duration `json:"duration_ns"`
	Transactions int64         `json:"transactions"`
	// CheckInterval is how often the checker reads the workload's keys
	// at one timestamp while the workers run.
	CheckInterval time.Duration `json:"check_interval_ns"`
	// Seed seeds each worker's stream of transactions; 0 picks one from
	// the time, recorded in the result.
	Seed uint64 `json:"seed"`
}

// DefaultTxnBenchConfig: bank, 1,000 accounts of 1,000 (or 1 warehouse)
// on 4 ranges, 8 workers for 30 s, a check a second.
func DefaultTxnBenchConfig() TxnBenchConfig {
	return TxnBenchConfig{Workload: WorkloadBank, Accounts: 1000, InitialBalance: 1000, Warehouses: 1, Ranges: 4, Workers: 8,
		Duration: 30 * time.Second, CheckInterval: time.Second}
}

// Bounds that keep a run from asking for what it cannot do in its time.
const (
	maxTxnAccounts   = 1_000_000
	maxTxnWarehouses = 100
	maxTxnWorkers    = 1024
	maxTxnRanges     = 256
)

// Validate refuses a configuration in one sentence, before anything runs.
func (c TxnBenchConfig) Validate() error {
	switch {
	case c.Duration <= 0:
		return fmt.Errorf("bench txn: --duration must be positive, not %v", c.Duration)
	case c.Workers < 1 || c.Workers > maxTxnWorkers:
		return fmt.Errorf("bench txn: --workers must be between 1 and %d, not %d", maxTxnWorkers, c.Workers)
	case c.Transactions < 0:
		return fmt.Errorf("bench txn: --transactions must be 0 (no bound) or positive, not %d", c.Transactions)
	case c.CheckInterval <= 0:
		return fmt.Errorf("bench txn: --check-interval must be positive, not %v", c.CheckInterval)
	}
	switch c.Workload {
	case WorkloadBank:
		return c.validateBank()
	case WorkloadTPCCLite:
		return c.validateTPCCLite()
	}
	return fmt.Errorf("bench txn: unknown workload %q; want bank or tpcc-lite", c.Workload)
}

func (c TxnBenchConfig) validateBank() error {
	switch {
	case c.Accounts < 2 || c.Accounts > maxTxnAccounts:
		return fmt.Errorf("bench txn: --accounts must be between 2 and %d (a transfer needs two accounts), not %d", maxTxnAccounts, c.Accounts)
	case c.Ranges < 1 || c.Ranges > min(c.Accounts, maxTxnRanges):
		return fmt.Errorf("bench txn: --ranges must be between 1 and %d (at most one per account), not %d", min(c.Accounts, maxTxnRanges), c.Ranges)
	case c.InitialBalance < 0 || c.InitialBalance > 1<<40:
		return fmt.Errorf("bench txn: --initial-balance must be between 0 and 2^40, not %d", c.InitialBalance)
	}
	return nil
}

func (c TxnBenchConfig) validateTPCCLite() error {
	switch {
	case c.Warehouses < 1 || c.Warehouses > maxTxnWarehouses:
		return fmt.Errorf("bench txn: --warehouses must be between 1 and %d, not %d", maxTxnWarehouses, c.Warehouses)
	case c.Ranges < 1 || c.Ranges > min(c.Warehouses*tpccDistricts, maxTxnRanges):
		return fmt.Errorf("bench txn: --ranges must be between 1 and %d (at most one per district), not %d", min(c.Warehouses*tpccDistricts, maxTxnRanges), c.Ranges)
	}
	return nil
}

func (c TxnBenchConfig) resolved() TxnBenchConfig {
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())&(1<<53-1) | 1
	}
	return c
}
