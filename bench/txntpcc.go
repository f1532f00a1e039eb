package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
)

// tpcc-lite: TPC-C's New-Order and Payment, half each, over a scaled-down
// schema with one key per row and a row's columns as space-separated
// integers (amounts in whole units):
//
//	warehouse  bench-tpcc/wWWWW             ytd
//	district   bench-tpcc/wWWWW/dDD         ytd next_o_id
//	customer   bench-tpcc/wWWWW/dDD/cCCCC   balance ytd_payment payment_cnt
//	order      bench-tpcc/wWWWW/dDD/oOOOOOOOO  c_id ol_cnt quantity (its lines folded in)
//	stock      bench-tpcc/wWWWW/sIIIII      quantity ytd order_cnt
//
// There are no item, history, new-order or order-line rows, no remote
// warehouses and no rolled-back New-Orders. The invariants checked on each
// snapshot are the TPC-C consistency conditions these two transactions
// keep (clause 3.3.2): W_YTD = Σ D_YTD (1); D_NEXT_O_ID − 1 = the
// district's order count = its largest O_ID (2, 3); and two of this
// schema's own: a warehouse's payments reached its customers
// (Σ C_YTD_PAYMENT − opening = W_YTD − opening) and its orders' lines its
// stock (Σ S_YTD = Σ order quantity, Σ S_ORDER_CNT = Σ O_OL_CNT).
const (
	tpccDistricts = 10
	tpccCustomers = 30 // per district (TPC-C: 3,000)
	tpccItems     = 1000
	// Opening values, as TPC-C's (W_YTD 300,000 = 10 × D_YTD).
	tpccWarehouseYTD  = 300000
	tpccDistrictYTD   = 30000
	tpccCustomerYTD   = 10
	tpccMaxPayment    = 5000
	tpccMinOrderLines = 5
	tpccMaxOrderLines = 15
	tpccMaxQuantity   = 10
	tpccPrefix        = "bench-tpcc/"
)

type tpccLite struct {
	warehouses, ranges, loaders int
}

func tpccWarehouseKey(w int) []byte { return fmt.Appendf(nil, tpccPrefix+"w%04d", w) }
func tpccDistrictKey(w, d int) []byte {
	return fmt.Appendf(nil, tpccPrefix+"w%04d/d%02d", w, d)
}
func tpccCustomerKey(w, d, c int) []byte {
	return fmt.Appendf(nil, tpccPrefix+"w%04d/d%02d/c%04d", w, d, c)
}
func tpccOrderKey(w, d int, o int64) []byte {
	return fmt.Appendf(nil, tpccPrefix+"w%04d/d%02d/o%08d", w, d, o)
}
func tpccStockKey(w, i int) []byte { return fmt.Appendf(nil, tpccPrefix+"w%04d/s%05d", w, i) }

// row encodes a row's columns.
func row(cols ...int64) []byte {
	var b []byte
	for i, c := range cols {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, c, 10)
	}
	return b
}

// parseRow decodes a row of n columns.
func parseRow(key, v []byte, n int) ([]int64, error) {
	f := bytes.Fields(v)
	if len(f) != n {
		return nil, fmt.Errorf("row %q holds %q, not %d columns", key, v, n)
	}
	cols := make([]int64, n)
	for i, s := range f {
		var err error
		if cols[i], err = strconv.ParseInt(string(s), 10, 64); err != nil {
			return nil, fmt.Errorf("row %q holds %q, not %d numbers", key, v, n)
		}
	}
	return cols, nil
}

// getRow reads and decodes a row of n columns in tx.
func getRow(ctx context.Context, tx TxnOps, key []byte, n int) ([]int64, error) {
	v, err := tx.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return parseRow(key, v, n)
}

// setup splits at evenly spaced districts, deletes the orders of an
// earlier run (the districts' order numbers start again) and loads every
// row but orders (stock quantities from 10 to 100, as TPC-C's).
func (t tpccLite) setup(ctx context.Context, store TxnStore, logf func(string, ...any)) error {
	districts := t.warehouses * tpccDistricts
	logf("splitting %d warehouses into %d ranges", t.warehouses, t.ranges)
	var splits [][]byte
	for q := range t.ranges {
		i := q * districts / t.ranges
		splits = append(splits, tpccDistrictKey(1+i/tpccDistricts, 1+i%tpccDistricts))
	}
	splits[0] = tpccWarehouseKey(1)
	if err := splitAt(ctx, store, splits); err != nil {
		return err
	}
	if err := t.deleteOrders(ctx, store, logf); err != nil {
		return err
	}
	perW := 1 + tpccDistricts*(1+tpccCustomers) + tpccItems
	logf("loading %d warehouses (%d rows)", t.warehouses, t.warehouses*perW)
	return loadKeys(ctx, store, t.loaders, t.warehouses*perW, func(i int) ([]byte, []byte) {
		w, j := 1+i/perW, i%perW
		switch {
		case j == 0:
			return tpccWarehouseKey(w), row(tpccWarehouseYTD)
		case j <= tpccDistricts*(1+tpccCustomers):
			d, c := 1+(j-1)/(1+tpccCustomers), (j-1)%(1+tpccCustomers)
			if c == 0 {
				return tpccDistrictKey(w, d), row(tpccDistrictYTD, 1)
			}
			return tpccCustomerKey(w, d, c), row(-tpccCustomerYTD, tpccCustomerYTD, 1)
		}
		item := j - tpccDistricts*(1+tpccCustomers)
		return tpccStockKey(w, item), row(10+int64(item*7919%91), 0, 0)
	})
}

func (t tpccLite) deleteOrders(ctx context.Context, store TxnStore, logf func(string, ...any)) error {
	start, end := t.span()
	kvs, _, err := store.SnapshotScan(ctx, start, end)
	if err != nil {
		return fmt.Errorf("bench txn: read the rows of an earlier run: %w", err)
	}
	var orders [][]byte
	for _, kv := range kvs {
		if k, err := parseTPCCKey(kv.Key); err == nil && k.kind == 'o' {
			orders = append(orders, kv.Key)
		}
	}
	if len(orders) == 0 {
		return nil
	}
	logf("deleting %d orders of an earlier run", len(orders))
	return inParallel(t.loaders, len(orders), func(i int) error {
		if err := store.Delete(ctx, orders[i]); err != nil {
			return fmt.Errorf("bench txn: delete %q: %w", orders[i], err)
		}
		return nil
	})
}

func (t tpccLite) span() (start, end []byte) {
	return tpccWarehouseKey(1), tpccWarehouseKey(t.warehouses + 1)
}

// next draws a New-Order or a Payment, half each, for a random customer.
func (t tpccLite) next(rng *rand.Rand) func(context.Context, TxnOps) error {
	w, d, c := 1+rng.IntN(t.warehouses), 1+rng.IntN(tpccDistricts), 1+rng.IntN(tpccCustomers)
	if rng.IntN(2) == 0 {
		amount := 1 + rng.Int64N(tpccMaxPayment)
		return func(ctx context.Context, tx TxnOps) error { return tpccPayment(ctx, tx, w, d, c, amount) }
	}
	n := tpccMinOrderLines + rng.IntN(tpccMaxOrderLines-tpccMinOrderLines+1)
	items := make([]int, 0, n)
	for len(items) < n {
		if i := 1 + rng.IntN(tpccItems); !slices.Contains(items, i) {
			items = append(items, i)
		}
	}
	// In item order, so that two New-Orders wait for each other's stock
	// rows in one direction, not in a cycle.
	slices.Sort(items)
	qty := make([]int64, n)
	for i := range qty {
		qty[i] = 1 + rng.Int64N(tpccMaxQuantity)
	}
	return func(ctx context.Context, tx TxnOps) error { return tpccNewOrder(ctx, tx, w, d, c, items, qty) }
}

// tpccPayment: the customer pays amount to its warehouse and district.
func tpccPayment(ctx context.Context, tx TxnOps, w, d, c int, amount int64) error {
	wk, dk, ck := tpccWarehouseKey(w), tpccDistrictKey(w, d), tpccCustomerKey(w, d, c)
	wr, err := getRow(ctx, tx, wk, 1)
	if err != nil {
		return err
	}
	dr, err := getRow(ctx, tx, dk, 2)
	if err != nil {
		return err
	}
	cr, err := getRow(ctx, tx, ck, 3)
	if err != nil {
		return err
	}
	if err := tx.Put(ctx, wk, row(wr[0]+amount)); err != nil {
		return err
	}
	if err := tx.Put(ctx, dk, row(dr[0]+amount, dr[1])); err != nil {
		return err
	}
	return tx.Put(ctx, ck, row(cr[0]-amount, cr[1]+amount, cr[2]+1))
}

// tpccNewOrder: the district's next order for the customer, taking qty[i]
// of items[i] from the warehouse's stock (restocked by 91 below 10).
func tpccNewOrder(ctx context.Context, tx TxnOps, w, d, c int, items []int, qty []int64) error {
	dk := tpccDistrictKey(w, d)
	dr, err := getRow(ctx, tx, dk, 2)
	if err != nil {
		return err
	}
	if err := tx.Put(ctx, dk, row(dr[0], dr[1]+1)); err != nil {
		return err
	}
	if _, err := getRow(ctx, tx, tpccCustomerKey(w, d, c), 3); err != nil {
		return err
	}
	var total int64
	for i, item := range items {
		sk := tpccStockKey(w, item)
		s, err := getRow(ctx, tx, sk, 3)
		if err != nil {
			return err
		}
		q := s[0] - qty[i]
		if q < 10 {
			q += 91
		}
		if err := tx.Put(ctx, sk, row(q, s[1]+qty[i], s[2]+1)); err != nil {
			return err
		}
		total += qty[i]
	}
	return tx.Put(ctx, tpccOrderKey(w, d, dr[1]), row(int64(c), int64(len(items)), total))
}
