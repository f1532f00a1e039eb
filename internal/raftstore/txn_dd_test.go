package raftstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
)

// Transaction directives of TestDataDriven (testdata/txn_*). A transaction
// is named by txn=T (its ID) and anchor=K (its record's key):
//
//	migrate [range=R]                  move R (default 2) to the versioned layout
//	merge left=L right=R               freeze R into L everywhere, then merge
//	txn-write txn=T anchor=K [at=old] k=v... [del=k]
//	                                   intents of T at the leaseholder's clock,
//	                                   or at=old: at wall time 1 (so below any
//	                                   committed version)
//	txn-heartbeat|txn-push|txn-end|txn-forget txn=T anchor=K [expiry=D] [status=commit|abort]
//	                                   the record's operations; each prints the
//	                                   record's status after it
//	txn-resolve txn=T anchor=K status=commit|abort k...
//	txn-record node=N txn=T anchor=K   the record as N's engine holds it
//	txn-begin name=R                   a read timestamp: the leaseholder's clock now
//	txn-commit1 txn=T read-at=R [reads=(k,...)] [scans=(start:end,...)] k=v... [del=k]
//	                                   a one-phase commit of T, which read the
//	                                   reads and scanned the spans (empty end:
//	                                   unbounded) at R, writing k=v and deleting
func (d *ddDriver) runTxn(t *testing.T, td *datadriven.TestData) (string, bool) {
	switch td.Cmd {
	case "migrate":
		rangeID := uint64(testRangeID)
		td.MaybeScanArgs(t, "range", &rangeID)
		d.tc.migrate(t, rangeID)
		return "ok", true
	case "merge":
		left, right := d.uintArg(t, td, "left"), d.uintArg(t, td, "right")
		frozen := d.tc.freezeEverywhere(t, right, left)
		ctx, cancel := context.WithTimeout(context.Background(), ddTimeout)
		defer cancel()
		if _, err := d.leaderOf(left).Merge(ctx, frozen); err != nil {
			return fmtErr(err), true
		}
		return "ok", true
	case "txn-write":
		return d.txnWrite(t, td), true
	case "txn-heartbeat", "txn-push", "txn-end", "txn-forget":
		return d.txnRecordOp(t, td), true
	case "txn-resolve":
		return d.txnResolve(t, td), true
	case "txn-record":
		return d.txnShowRecord(t, td), true
	case "txn-begin":
		return d.txnBegin(t, td), true
	case "txn-commit1":
		return d.txnCommitOnePhase(t, td), true
	}
	return "", false
}

func (d *ddDriver) txnRef(t *testing.T, td *datadriven.TestData) *tidekvpb.TxnRef {
	var id, anchor string
	td.ScanArgs(t, "txn", &id)
	td.ScanArgs(t, "anchor", &anchor)
	return &tidekvpb.TxnRef{Id: []byte(id), Anchor: []byte(anchor)}
}

func txnStatus(t *testing.T, td *datadriven.TestData) tidekvpb.TxnStatus {
	var s string
	td.ScanArgs(t, "status", &s)
	switch s {
	case "commit":
		return tidekvpb.TxnStatus_TXN_COMMITTED
	case "abort":
		return tidekvpb.TxnStatus_TXN_ABORTED
	}
	td.Fatalf(t, "status is commit or abort, not %q", s)
	return 0
}

func (d *ddDriver) txnWrite(t *testing.T, td *datadriven.TestData) string {
	ref := d.txnRef(t, td)
	var ops []*tidekvpb.WriteOp
	for _, a := range kvArgs(td, "txn", "anchor", "at") {
		if a.Key == "del" {
			ops = append(ops, &tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_DELETE, Key: []byte(a.Vals[0])})
		} else {
			ops = append(ops, &tidekvpb.WriteOp{Key: []byte(a.Key), Value: []byte(a.Vals[0])})
		}
	}
	err := d.do(t, td, ops[0].GetKey(), true, func(ctx context.Context, r *Replica) error {
		at := r.store.hlc.Now()
		if td.HasArg("at") {
			at = hlc.Timestamp{WallTime: 1}
		}
		_, err := r.WriteIntents(ctx, ref, at, ops)
		return err
	})
	if err != nil {
		return fmtErr(err)
	}
	return "ok"
}

func (d *ddDriver) txnBegin(t *testing.T, td *datadriven.TestData) string {
	var name string
	td.ScanArgs(t, "name", &name)
	if d.readAt == nil {
		d.readAt = map[string]hlc.Timestamp{}
	}
	d.readAt[name] = d.leaderOf(testRangeID).store.hlc.Now()
	return "ok"
}

func (d *ddDriver) txnCommitOnePhase(t *testing.T, td *datadriven.TestData) string {
	var id, at string
	td.ScanArgs(t, "txn", &id)
	td.ScanArgs(t, "read-at", &at)
	readTS, ok := d.readAt[at]
	if !ok {
		td.Fatalf(t, "no txn-begin named %q", at)
	}
	var reads [][]byte
	var scans []*tidekvpb.KeySpan
	var ops []*tidekvpb.WriteOp
	for _, a := range kvArgs(td, "txn", "read-at") {
		switch a.Key {
		case "reads":
			for _, k := range a.Vals {
				reads = append(reads, []byte(k))
			}
		case "scans":
			for _, sp := range a.Vals {
				start, end, _ := strings.Cut(sp, ":")
				scans = append(scans, &tidekvpb.KeySpan{StartKey: []byte(start), EndKey: []byte(end)})
			}
		case "del":
			ops = append(ops, &tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_DELETE, Key: []byte(a.Vals[0])})
		default:
			ops = append(ops, &tidekvpb.WriteOp{Key: []byte(a.Key), Value: []byte(a.Vals[0])})
		}
	}
	err := d.do(t, td, ops[0].GetKey(), false, func(ctx context.Context, r *Replica) error {
		_, err := r.CommitOnePhase(ctx, []byte(id), readTS, reads, scans, ops)
		return err
	})
	if err != nil {
		return fmtErr(err)
	}
	return "ok"
}

func (d *ddDriver) txnRecordOp(t *testing.T, td *datadriven.TestData) string {
	ref := d.txnRef(t, td)
	var rec *tidekvpb.TxnRecord
	err := d.do(t, td, ref.GetAnchor(), false, func(ctx context.Context, r *Replica) error {
		var err error
		switch td.Cmd {
		case "txn-heartbeat":
			rec, err = r.HeartbeatTxn(ctx, ref, td.HasArg("refresh"))
		case "txn-end":
			var commitTS hlc.Timestamp
			st := txnStatus(t, td)
			if st == tidekvpb.TxnStatus_TXN_COMMITTED {
				commitTS = r.store.hlc.Now()
			}
			rec, err = r.EndTxn(ctx, ref, st, commitTS)
		case "txn-forget":
			rec, err = r.ForgetTxn(ctx, ref)
		case "txn-push":
			var s string
			td.ScanArgs(t, "expiry", &s)
			expiry, perr := time.ParseDuration(s)
			if perr != nil {
				td.Fatalf(t, "expiry: %v", perr)
			}
			rec, err = r.PushTxn(ctx, ref, expiry)
		}
		return err
	})
	if err != nil {
		return fmtErr(err)
	}
	return rec.GetStatus().String()
}

func (d *ddDriver) txnResolve(t *testing.T, td *datadriven.TestData) string {
	ref, st := d.txnRef(t, td), txnStatus(t, td)
	var ks [][]byte
	for _, a := range td.CmdArgs {
		if len(a.Vals) == 0 {
			ks = append(ks, []byte(a.Key))
		}
	}
	err := d.do(t, td, ks[0], true, func(ctx context.Context, r *Replica) error {
		return r.ResolveIntents(ctx, ref, ks, st, r.store.hlc.Now())
	})
	if err != nil {
		return fmtErr(err)
	}
	return "ok"
}

// txnShowRecord reads the record from a node's engine, as its replicas
// would (it settles: a follower may apply later).
func (d *ddDriver) txnShowRecord(t *testing.T, td *datadriven.TestData) string {
	node, ref := d.uintArg(t, td, "node"), d.txnRef(t, td)
	return d.settle(td, func() string {
		raw, found, err := d.tc.engines[node].Get(mvcc.RecordKey(keys.VersionedKey(ref.GetAnchor()), ref.GetId()))
		if err != nil || !found {
			return fmt.Sprintf("no record (%v)", err)
		}
		rec := &tidekvpb.TxnRecord{}
		if err := proto.Unmarshal(raw, rec); err != nil {
			return err.Error()
		}
		return rec.GetStatus().String()
	})
}

// fmtTxnErr renders the transaction errors without their timestamps.
func fmtTxnErr(err error) (string, bool) {
	var ie *IntentError
	var wto *WriteTooOldError
	var se *TxnStatusError
	var rc *ReadChangedError
	switch {
	case errors.As(err, &rc):
		return fmt.Sprintf("read changed: %s was written after the transaction read it", rc.Key), true
	case errors.As(err, &ie):
		return fmt.Sprintf("intent of %s on %s", ie.Txn.GetId(), ie.Key), true
	case errors.As(err, &wto):
		return fmt.Sprintf("write too old: %s has a newer committed version", wto.Key), true
	case errors.As(err, &se) && !se.Found:
		return fmt.Sprintf("%s has no record", se.Txn.GetId()), true
	case errors.As(err, &se):
		return fmt.Sprintf("%s is %s already", se.Txn.GetId(), se.Status), true
	}
	return "", false
}
