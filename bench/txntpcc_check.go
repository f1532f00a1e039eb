package bench

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// tpccKey is a parsed tpcc-lite key: kind 'w', 'd', 'c', 'o' or 's', its
// warehouse, district (d, c, o) and own number (c, o, s).
type tpccKey struct {
	kind byte
	w, d int
	id   int64
}

var errNotTPCCKey = errors.New("not a tpcc-lite key")

func parseTPCCKey(key []byte) (tpccKey, error) {
	rest, ok := bytes.CutPrefix(key, []byte(tpccPrefix))
	if !ok {
		return tpccKey{}, errNotTPCCKey
	}
	parts := bytes.Split(rest, []byte("/"))
	nums := make([]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(string(p[min(1, len(p)):]), 10, 64)
		if len(p) < 2 || err != nil {
			return tpccKey{}, errNotTPCCKey
		}
		nums[i] = n
	}
	k := tpccKey{kind: parts[len(parts)-1][0], w: int(nums[0])}
	switch {
	case len(parts) == 1 && k.kind == 'w':
	case len(parts) == 2 && k.kind == 'd':
		k.d = int(nums[1])
	case len(parts) == 2 && k.kind == 's':
		k.id = nums[1]
	case len(parts) == 3 && parts[1][0] == 'd' && (k.kind == 'c' || k.kind == 'o'):
		k.d, k.id = int(nums[1]), nums[2]
	default:
		return tpccKey{}, errNotTPCCKey
	}
	return k, nil
}

// tpccWarehouseSums are what one snapshot holds of a warehouse.
type tpccWarehouseSums struct {
	ytd                          int64
	rows, districts, customers   int
	stock                        int
	districtYTD, customerPaid    int64
	stockYTD, stockOrders        int64
	orderQuantity, orderLineRows int64
	byDistrict                   [tpccDistricts + 1]tpccDistrictSums
}

type tpccDistrictSums struct {
	next, orders, maxOrder int64
}

// check sums the snapshot per warehouse and district, then holds the sums
// to the invariants (txntpcc.go).
func (t tpccLite) check(kvs []KeyValue, at string) error {
	ws := make([]tpccWarehouseSums, t.warehouses+1)
	for _, kv := range kvs {
		k, err := parseTPCCKey(kv.Key)
		if err != nil || k.w < 1 || k.w > t.warehouses || k.d > tpccDistricts {
			return fmt.Errorf("in the snapshot at %s key %q is not a tpcc-lite row", at, kv.Key)
		}
		if err := ws[k.w].add(k, kv); err != nil {
			return fmt.Errorf("in the snapshot at %s %w", at, err)
		}
	}
	for w := 1; w <= t.warehouses; w++ {
		if err := ws[w].check(); err != nil {
			return fmt.Errorf("in the snapshot at %s warehouse %d: %w", at, w, err)
		}
	}
	return nil
}

// add counts one row into s.
func (s *tpccWarehouseSums) add(k tpccKey, kv KeyValue) error {
	cols := map[byte]int{'w': 1, 'd': 2, 'c': 3, 'o': 3, 's': 3}[k.kind]
	r, err := parseRow(kv.Key, kv.Value, cols)
	if err != nil {
		return err
	}
	switch k.kind {
	case 'w':
		s.ytd, s.rows = r[0], s.rows+1
	case 'd':
		s.districts++
		s.districtYTD += r[0]
		s.byDistrict[k.d].next = r[1]
	case 'c':
		s.customers++
		s.customerPaid += r[1] - tpccCustomerYTD
	case 'o':
		ds := &s.byDistrict[k.d]
		ds.orders++
		ds.maxOrder = max(ds.maxOrder, k.id)
		s.orderLineRows += r[1]
		s.orderQuantity += r[2]
	case 's':
		s.stock++
		s.stockYTD += r[1]
		s.stockOrders += r[2]
	}
	return nil
}

// check holds one warehouse's sums to the invariants.
func (s *tpccWarehouseSums) check() error {
	switch {
	case s.rows != 1 || s.districts != tpccDistricts || s.customers != tpccDistricts*tpccCustomers || s.stock != tpccItems:
		return fmt.Errorf("%d warehouse, %d district, %d customer and %d stock rows, not 1, %d, %d and %d",
			s.rows, s.districts, s.customers, s.stock, tpccDistricts, tpccDistricts*tpccCustomers, tpccItems)
	case s.ytd != s.districtYTD:
		return fmt.Errorf("W_YTD is %d but its districts' D_YTD sum to %d (TPC-C consistency condition 1): a payment was applied in part", s.ytd, s.districtYTD)
	case s.customerPaid != s.ytd-tpccWarehouseYTD:
		return fmt.Errorf("its customers paid %d but W_YTD grew by %d: a payment was applied in part", s.customerPaid, s.ytd-tpccWarehouseYTD)
	case s.stockYTD != s.orderQuantity || s.stockOrders != s.orderLineRows:
		return fmt.Errorf("its stock gave %d units to %d order lines, but its orders hold %d units in %d lines: a new order was applied in part",
			s.stockYTD, s.stockOrders, s.orderQuantity, s.orderLineRows)
	}
	for d := 1; d <= tpccDistricts; d++ {
		ds := s.byDistrict[d]
		if ds.orders != ds.next-1 || ds.maxOrder != ds.next-1 {
			return fmt.Errorf("district %d: D_NEXT_O_ID is %d but it has %d orders, the last numbered %d (TPC-C consistency conditions 2 and 3): a new order was applied in part",
				d, ds.next, ds.orders, ds.maxOrder)
		}
	}
	return nil
}
