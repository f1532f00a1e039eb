package txn

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Scans inside a transaction (docs/transactions.md "Scans in
// transactions"): the coordinator scans at the transaction's read
// timestamp, lays the transaction's own writes over what it found, and
// records the span as far as it read it, which the commit checks like the
// keys it read: no key in it may have changed, appeared or gone away
// between the read timestamp and the commit's.

// Scan reads up to limit keys (0: every key) of [start, end) (empty end:
// no bound) as the transaction sees them.
func (c *Coordinator) Scan(ctx context.Context, meta *tidekvpb.TxnMeta, start, end []byte, limit int) (*tidekvpb.TxnScanResponse, error) {
	if err := c.deps.Node.CheckKey(start); err != nil {
		return nil, err
	}
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return nil, &invalidError{fmt.Sprintf("a scan's start %q is not before its end %q", start, end)}
	}
	ctx, err := c.inKeySpace(ctx, meta, start)
	if err != nil {
		return nil, err
	}
	t, err := c.lockOpen(ctx, meta)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	var out []*tidekvpb.KeyValue
	var readTo []byte
	err = c.read(ctx, t, func() (err error) {
		out, readTo, err = t.scan(ctx, c.deps.Send, start, end, limit, c.deps.MaxScanLimit, c.deps.Config)
		return err
	})
	if err != nil {
		return nil, c.failOp(t, err)
	}
	t.scans = append(t.scans, &tidekvpb.KeySpan{StartKey: start, EndKey: readTo})
	return &tidekvpb.TxnScanResponse{Kvs: out, ReadTimestamp: tidekvpb.FromHLC(t.readTS)}, nil
}

// scan reads [start, end) at t's read timestamp with t's writes laid over
// it, and returns where it stopped reading (end, or just after the last
// key when limit cut it). Each pass asks the ranges for as many keys as
// limit plus the deletes t keeps, which its writes may remove, but at
// most maxAsk (> 0), what a range serves in one scan; the passes go on
// until limit or end, also when limit is 0 (every key). An answer that
// would hold more than lim's keys or bytes is refused, not cut short: a
// partial answer would read as the whole span (KEYS, DBSIZE).
func (t *openTxn) scan(ctx context.Context, send Sender, start, end []byte, limit, maxAsk int, lim Config) ([]*tidekvpb.KeyValue, []byte, error) {
	ask := maxAsk
	if limit > 0 {
		ask = limit + t.pendingDeletes()
		if maxAsk > 0 {
			ask = min(ask, maxAsk)
		}
	}
	var out []*tidekvpb.KeyValue
	var size int64
	for from := start; ; {
		kvs, err := send.Scan(ctx, from, end, ask, t.readAt())
		if err != nil {
			return nil, nil, err
		}
		upTo, done := end, ask == 0 || len(kvs) < ask
		if !done {
			upTo = append(slices.Clone(kvs[len(kvs)-1].Key), 0)
		}
		page := t.overlay(kvs, from, upTo)
		out = append(out, page...)
		if limit > 0 && len(out) >= limit {
			out = out[:limit]
			return out, append(slices.Clone(out[limit-1].Key), 0), nil
		}
		for _, kv := range page {
			size += int64(len(kv.GetKey()) + len(kv.GetValue()))
		}
		if len(out) > lim.MaxKeys || size > lim.MaxBytes {
			return nil, nil, &invalidError{fmt.Sprintf("transaction %x: a scan of [%q, %q) would answer more than %d keys and %d bytes, over its limit of %d keys and %d bytes; scan with a limit",
				t.key.GetId(), start, end, len(out), size, lim.MaxKeys, lim.MaxBytes)}
		}
		if done {
			return out, end, nil
		}
		from = upTo
	}
}

// overlay lays t's writes in [from, upTo) (empty upTo: no bound) over
// kvs, the keys a scan found there, in key order.
func (t *openTxn) overlay(kvs []KeyValue, from, upTo []byte) []*tidekvpb.KeyValue {
	byKey := make(map[string][]byte, len(kvs))
	for _, kv := range kvs {
		byKey[string(kv.Key)] = kv.Value
	}
	for _, op := range t.pending {
		k := op.GetKey()
		if bytes.Compare(k, from) < 0 || (len(upTo) > 0 && bytes.Compare(k, upTo) >= 0) {
			continue
		}
		if op.GetKind() == tidekvpb.WriteOp_DELETE {
			delete(byKey, string(k))
		} else {
			byKey[string(k)] = op.GetValue()
		}
	}
	out := make([]*tidekvpb.KeyValue, 0, len(byKey))
	for k, v := range byKey {
		out = append(out, &tidekvpb.KeyValue{Key: []byte(k), Value: v})
	}
	slices.SortFunc(out, func(a, b *tidekvpb.KeyValue) int { return bytes.Compare(a.GetKey(), b.GetKey()) })
	return out
}

func (t *openTxn) pendingDeletes() int {
	n := 0
	for _, op := range t.pending {
		if op.GetKind() == tidekvpb.WriteOp_DELETE {
			n++
		}
	}
	return n
}
