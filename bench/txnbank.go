package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
)

// bankMaxAmount is the largest amount one transfer moves.
const bankMaxAmount = 10

// bank is the bank workload: transfers between random pairs of accounts,
// whose total never changes.
type bank struct {
	accounts int
	balance  int64 // each account's opening balance
	ranges   int
	loaders  int
}

// bankKey is account i's key; the fixed width keeps the accounts in
// number order, so a scan from account 0 to account N reads exactly them.
func bankKey(i int) []byte { return fmt.Appendf(nil, "bench-bank/%08d", i) }

// setup splits the accounts' span into ranges at evenly spaced account
// keys, then writes every account's opening balance.
func (b bank) setup(ctx context.Context, store TxnStore, logf func(string, ...any)) error {
	logf("splitting %d accounts into %d ranges", b.accounts, b.ranges)
	var splits [][]byte
	for q := range b.ranges {
		splits = append(splits, bankKey(q*b.accounts/b.ranges))
	}
	if err := splitAt(ctx, store, splits); err != nil {
		return err
	}
	logf("loading %d accounts of %d", b.accounts, b.balance)
	balance := strconv.AppendInt(nil, b.balance, 10)
	return loadKeys(ctx, store, b.loaders, b.accounts, func(i int) ([]byte, []byte) { return bankKey(i), balance })
}

// next draws a transfer of 1 to bankMaxAmount between two accounts.
func (b bank) next(rng *rand.Rand) func(context.Context, TxnOps) error {
	from, to := rng.IntN(b.accounts), rng.IntN(b.accounts-1)
	if to >= from {
		to++
	}
	amount := 1 + rng.Int64N(bankMaxAmount)
	return func(ctx context.Context, tx TxnOps) error {
		return moveMoney(ctx, tx, bankKey(from), bankKey(to), amount)
	}
}

func (b bank) span() (start, end []byte) { return bankKey(0), bankKey(b.accounts) }

func (b bank) check(kvs []KeyValue, at string) error {
	return checkBankTotal(kvs, at, b.accounts, int64(b.accounts)*b.balance)
}

// moveMoney is one attempt of a transfer. Balances may go below zero:
// the invariant is the total, not each account.
func moveMoney(ctx context.Context, tx TxnOps, from, to []byte, amount int64) error {
	var bal [2]int64
	for i, k := range [][]byte{from, to} {
		v, err := tx.Get(ctx, k)
		if err != nil {
			return err
		}
		if bal[i], err = strconv.ParseInt(string(v), 10, 64); err != nil {
			return fmt.Errorf("account %q holds %q, not a balance", k, v)
		}
	}
	if err := tx.Put(ctx, from, strconv.AppendInt(nil, bal[0]-amount, 10)); err != nil {
		return err
	}
	return tx.Put(ctx, to, strconv.AppendInt(nil, bal[1]+amount, 10))
}

// checkBankTotal is the bank's invariant on one snapshot: every account
// is there, holds a number, and together they hold want.
func checkBankTotal(kvs []KeyValue, at string, accounts int, want int64) error {
	if len(kvs) != accounts {
		return fmt.Errorf("the snapshot at %s holds %d accounts, not %d", at, len(kvs), accounts)
	}
	var total int64
	for _, kv := range kvs {
		v, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			return fmt.Errorf("in the snapshot at %s account %q holds %q, not a balance", at, kv.Key, kv.Value)
		}
		total += v
	}
	if total != want {
		return fmt.Errorf("in the snapshot at %s the %d accounts hold %d in total, not %d: a transfer was lost or applied in part", at, accounts, total, want)
	}
	return nil
}
