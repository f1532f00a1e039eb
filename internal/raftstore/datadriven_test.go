package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// TestDataDriven runs the scenarios in testdata/ against an in-process
// cluster (newTestCluster). Each file starts with a cluster command; every
// later command runs against that cluster. Commands:
//
//	cluster nodes=N [log-keep=N] [rf=N]
//	                                   start N nodes sharing range 2 = [-, -)
//	put [range=R] [node=N] [raw] k=v...
//	                                   write keys, routed to their range's
//	                                   leaseholder unless range/node is given;
//	                                   raw skips the request-path key check
//	get [node=N] [mode=any|bounded] [staleness=D] [txn=T] [settle] k...
//	                                   reads, linearizable unless mode is given
//	                                   (bounded: at most D stale, default 1s), as
//	                                   transaction T (its own intents show);
//	                                   settle: until the output is as expected
//	batch-get [range=R] k...           one BatchGet (routed by the first key)
//	delete k...                        deletes; prints whether the key existed
//	cas k=K (expect=V | absent) (new=V | delete)
//	scan [range=R] [start=K] [end=K] [limit=N]
//	split [range=R] key=K id=N         split the range holding K (or R); N is
//	                                   the new range's ID
//	add-replica range=R node=N [timeout=D]
//	add-learner range=R node=N [timeout=D]   an adaptive learner (never promoted)
//	remove-replica range=R node=N
//	interrupted-add range=R node=N     only the first step of an addition (a
//	                                   plain learner), as a dead leaseholder
//	                                   leaves it
//	change-replicas range=R add=N remove=M   both in one joint change
//	transfer-lease range=R node=N      waits until N holds the lease
//	wait-leader range=R                a reachable node holds the lease
//	wait-lease-expired range=R node=N  N no longer claims the lease
//	crash node=N | restart node=N | add-node
//	isolate node=N | heal node=N
//	size-split-key range=R             the key that halves R's data
//	publish-closed range=R             R's leaseholder publishes a closed
//	                                   timestamp to the reachable nodes, which
//	                                   then apply up to its index
//	ranges                             every node's replicas (settles);
//	                                   n4(a) is an adaptive learner
//	data [node=N]                      every node's user keys (settles)
//	snapshots [node=N] [no-counts]     snapshots each node accepted (settles)
//	refuse-snapshots node=N [count=K]  N refuses its next K snapshots
//	directory publish|unpublish        the range directory the stores check
//	                                   replicas against: what the running
//	                                   nodes' replicas say now, or unreachable
//	gc node=N                          N's replica GC against the directory
//	migrate, merge, txn-...            transactions (txn_dd_test.go)
//
// Commands that print cluster state "settle": they poll until the output
// matches the expected one (or, under -rewrite, until it stops changing), so
// files describe converged states without fixed sleeps.
func TestDataDriven(t *testing.T) {
	files, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name() == "fuzz" {
			continue // Go's seed corpus of the fuzz tests, not scenarios
		}
		t.Run(f.Name(), func(t *testing.T) {
			datadriven.Walk(t, filepath.Join("testdata", f.Name()), func(t *testing.T, path string) {
				d := &ddDriver{fileT: t}
				datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
					return d.run(t, td)
				})
			})
		})
	}
}

// ddDriver holds one scenario file's cluster. The cluster belongs to the
// file-level test (datadriven runs every directive as its own subtest, whose
// cleanups would stop the cluster after the first command).
type ddDriver struct {
	fileT    *testing.T
	tc       *testCluster
	isolated map[uint64]bool
	snaps    map[uint64]*snapCounters
	dir      ddDirectory
	// readAt: the read timestamps txn-begin took, by name.
	readAt map[string]hlc.Timestamp
}

// snapCounters are a node's snapshot counters; they outlive restarts.
type snapCounters struct {
	accepted atomic.Int64
	// refuse is how many of the next snapshots to refuse before the store
	// sees them, as a receiver does when one overlaps a local range.
	refuse atomic.Int64
	// refused counts the snapshots the store itself refused.
	refused atomic.Int64
}

// countingHandler counts the snapshots a node accepted, so scenarios can
// show that catching up went through a snapshot rather than the log.
type countingHandler struct {
	s *Store
	c *snapCounters
}

func (h countingHandler) HandleRaftMessage(m *tidekvpb.RaftMessage) { h.s.HandleRaftMessage(m) }

func (h countingHandler) HandleSnapshot(hdr *tidekvpb.RaftMessage, sst io.Reader) error {
	if h.c.refuse.Add(-1) >= 0 {
		return errors.New("refused by the test")
	}
	h.c.refuse.Store(0)
	err := h.s.HandleSnapshot(hdr, sst)
	if err == nil {
		h.c.accepted.Add(1)
	} else {
		h.c.refused.Add(1)
	}
	return err
}

// wrap replaces a store's network registration with a counting one.
func (d *ddDriver) wrap(id uint64) {
	if d.snaps[id] == nil {
		d.snaps[id] = &snapCounters{}
	}
	d.tc.stores[id].SetRangeDirectory(&d.dir)
	d.tc.net.Register(id, countingHandler{s: d.tc.stores[id], c: d.snaps[id]})
}

// start runs a store on node id's engine like testCluster.startStore, but
// registers it counted before it starts, so no snapshot slips by uncounted.
func (d *ddDriver) start(t *testing.T, id uint64) {
	s, err := NewStore(d.tc.cfg, id, d.tc.engines[id], d.tc.net.Transport(id), nil)
	if err != nil {
		t.Fatal(err)
	}
	d.tc.stores[id] = s
	d.wrap(id)
	s.Start()
}

func (d *ddDriver) run(t *testing.T, td *datadriven.TestData) string {
	if td.Cmd != "cluster" && d.tc == nil {
		td.Fatalf(t, "no cluster: the file must start with a cluster command")
	}
	if d.tc != nil {
		d.tc.t = t // harness helpers report through the directive's test
	}
	switch td.Cmd {
	case "cluster":
		return d.cluster(t, td)
	case "put":
		return d.put(t, td)
	case "get":
		return d.get(t, td)
	case "batch-get":
		return d.batchGet(t, td)
	case "delete":
		return d.del(t, td)
	case "cas":
		return d.cas(t, td)
	case "incr":
		return d.incr(t, td)
	case "scan":
		return d.scan(t, td)
	case "split":
		return d.split(t, td)
	case "add-replica", "remove-replica", "change-replicas", "add-learner":
		return d.changeReplicas(t, td)
	case "interrupted-add":
		return d.interruptedAdd(t, td)
	case "size-split-key":
		var key []byte
		err := d.do(t, td, nil, true, func(ctx context.Context, r *Replica) error {
			var err error
			key, err = r.SizeSplitKey(ctx)
			return err
		})
		if err != nil {
			return fmtErr(err)
		}
		return fmtKey(key)
	case "publish-closed":
		return d.publishClosed(t, td)
	case "transfer-lease":
		return d.transferLease(t, td)
	case "wait-leader":
		rangeID := d.uintArg(t, td, "range")
		if err := d.poll(func() bool { return d.leaderOf(rangeID) != nil }); err != nil {
			return fmt.Sprintf("no leader for r%d", rangeID)
		}
		return "ok"
	case "wait-lease-expired":
		rangeID, node := d.uintArg(t, td, "range"), d.uintArg(t, td, "node")
		r := d.replica(t, node, rangeID)
		if err := d.poll(func() bool { return !r.IsLeader() }); err != nil {
			return fmt.Sprintf("n%d still claims the lease of r%d", node, rangeID)
		}
		return "ok"
	case "crash":
		id := d.uintArg(t, td, "node")
		d.tc.crash(id)
		return "ok"
	case "restart":
		d.start(t, d.uintArg(t, td, "node"))
		return "ok"
	case "add-node":
		id := uint64(len(d.tc.nodes) + 1)
		d.tc.nodes = append(d.tc.nodes, id)
		d.tc.engines[id] = storage.NewMem()
		d.start(t, id)
		return fmt.Sprintf("n%d", id)
	case "isolate", "heal":
		id := d.uintArg(t, td, "node")
		cut := td.Cmd == "isolate"
		d.tc.net.Isolate(id, d.tc.nodes, cut)
		d.isolated[id] = cut
		return "ok"
	case "ranges":
		return d.settle(td, d.showRanges)
	case "data":
		var node uint64
		if td.HasArg("node") {
			node = d.uintArg(t, td, "node")
		}
		return d.settle(td, func() string { return d.showData(node) })
	case "refuse-snapshots":
		id := d.uintArg(t, td, "node")
		var n int64 = 1
		td.MaybeScanArgs(t, "count", &n)
		d.snaps[id].refuse.Store(n)
		return "ok"
	case "directory":
		return d.directory(t, td)
	case "gc":
		return d.gc(t, td)
	case "snapshots":
		var node uint64
		td.MaybeScanArgs(t, "node", &node)
		return d.settle(td, func() string { return d.showSnapshots(node, !td.HasArg("no-counts")) })
	default:
		if out, ok := d.runTxn(t, td); ok {
			return out
		}
		td.Fatalf(t, "unknown command %q", td.Cmd)
		return ""
	}
}

func (d *ddDriver) cluster(t *testing.T, td *datadriven.TestData) string {
	n := 3
	td.MaybeScanArgs(t, "nodes", &n)
	var mutate []func(*Config)
	if td.HasArg("log-keep") {
		var keep uint64
		td.ScanArgs(t, "log-keep", &keep)
		mutate = append(mutate, func(c *Config) { c.LogKeepEntries = keep })
	}
	if td.HasArg("rf") {
		var rf int
		td.ScanArgs(t, "rf", &rf)
		mutate = append(mutate, func(c *Config) { c.ReplicationFactor = rf })
	}
	if d.tc != nil {
		td.Fatalf(t, "one cluster per file")
	}
	d.tc = newTestCluster(d.fileT, n, mutate...)
	d.tc.t = t
	d.isolated = map[uint64]bool{}
	d.snaps = map[uint64]*snapCounters{}
	for _, id := range d.tc.nodes {
		d.wrap(id)
	}
	if err := d.poll(func() bool { return d.leaderOf(testRangeID) != nil }); err != nil {
		return "no leader elected"
	}
	return "ok"
}

// --- lookups -------------------------------------------------------------

func (d *ddDriver) uintArg(t *testing.T, td *datadriven.TestData, key string) uint64 {
	var v uint64
	td.ScanArgs(t, key, &v)
	return v
}

// reachable lists the running, non-isolated nodes in ID order.
func (d *ddDriver) reachable() []uint64 {
	var out []uint64
	for _, id := range d.tc.nodes {
		if d.tc.stores[id] != nil && !d.isolated[id] {
			out = append(out, id)
		}
	}
	return out
}

// leaderOf returns the replica of rangeID that holds the lease among the
// reachable nodes, nil if none does (an isolated old leader that has not
// noticed yet does not count).
func (d *ddDriver) leaderOf(rangeID uint64) *Replica {
	for _, id := range d.reachable() {
		if r := d.tc.stores[id].GetReplica(rangeID); r != nil && r.IsLeader() {
			return r
		}
	}
	return nil
}

// leaderFor returns the leaseholder of the range covering key, as a client
// with a perfect cache would find it.
func (d *ddDriver) leaderFor(key []byte) *Replica {
	for _, id := range d.reachable() {
		for _, r := range d.tc.stores[id].Replicas() {
			if desc := r.Desc(); desc != nil && r.IsLeader() && r.RangeID() != keys.MetaRangeID &&
				keys.Contains(desc.GetStartKey(), desc.GetEndKey(), key) {
				return r
			}
		}
	}
	return nil
}

// replica returns node's replica of rangeID, failing the directive if absent.
func (d *ddDriver) replica(t *testing.T, node, rangeID uint64) *Replica {
	s := d.tc.stores[node]
	if s == nil {
		t.Fatalf("n%d is not running", node)
	}
	r := s.GetReplica(rangeID)
	if r == nil {
		t.Fatalf("n%d holds no replica of r%d", node, rangeID)
	}
	return r
}

// How a request was aimed, which decides what a failure is retried on.
type aim int

const (
	routed      aim = iota // by key to its leaseholder: retry anything retryable
	rangePinned            // range=R: that range's leaseholder, whatever the key
	nodePinned             // node=N: exactly that replica, no retries
)

// target picks the replica a request goes to: node=N (with range=R, that
// replica; else N's replica covering key), range=R (its leaseholder), or
// the leaseholder of the range covering key.
func (d *ddDriver) target(t *testing.T, td *datadriven.TestData, key []byte) (*Replica, aim) {
	var node, rangeID uint64
	td.MaybeScanArgs(t, "node", &node)
	td.MaybeScanArgs(t, "range", &rangeID)
	switch {
	case node != 0 && rangeID != 0:
		return d.replica(t, node, rangeID), nodePinned
	case node != 0:
		s := d.tc.stores[node]
		if s == nil {
			t.Fatalf("n%d is not running", node)
		}
		r := s.LookupKey(key)
		if r == nil {
			t.Fatalf("n%d has no replica covering %q", node, key)
		}
		return r, nodePinned
	case rangeID != 0:
		return d.leaderOf(rangeID), rangePinned
	}
	return d.leaderFor(key), routed
}

// --- polling ---------------------------------------------------------------

const ddTimeout = 10 * time.Second

// poll waits for cond, checking every few milliseconds.
func (d *ddDriver) poll(cond func() bool) error {
	deadline := time.Now().Add(ddTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// settle returns f's output once it matches the expected output, or under
// -rewrite once it has not changed for a while; on timeout it returns the
// last output so the diff shows what the cluster converged to instead.
func (d *ddDriver) settle(td *datadriven.TestData, f func() string) string {
	const stableFor = 500 * time.Millisecond
	want := strings.TrimSpace(td.Expected)
	deadline := time.Now().Add(ddTimeout)
	last, since := "", time.Now()
	for {
		out := f()
		if !td.Rewrite && strings.TrimSpace(out) == want {
			return out
		}
		if out != last {
			last, since = out, time.Now()
		} else if td.Rewrite && time.Since(since) >= stableFor {
			return out
		}
		if time.Now().After(deadline) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// retryable reports whether err means "the request certainly did not take
// effect there, try the current leaseholder" (or, for idempotent requests,
// that trying again is harmless). Key and range mismatches mean stale
// routing, which only routed requests may fix, and only if the key that
// missed is the one routed by (not a second key in another range).
func retryable(err error, a aim, key []byte, idempotent bool) bool {
	var nl *NotLeaderError
	var rnf *RangeNotFoundError
	var km *KeyMismatchError
	switch {
	case a == nodePinned:
		return false
	case errors.As(err, &nl), errors.Is(err, ErrOverloaded):
		return true
	case errors.As(err, &km):
		return a == routed && bytes.Equal(km.Key, key)
	case errors.As(err, &rnf):
		return a == routed
	case errors.Is(err, ErrAmbiguous):
		return idempotent
	}
	return false
}

// do runs fn against the replica target picks, retrying across leadership
// changes and splits as retryable allows.
func (d *ddDriver) do(t *testing.T, td *datadriven.TestData, key []byte, idempotent bool, fn func(context.Context, *Replica) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), ddTimeout)
	defer cancel()
	for {
		r, a := d.target(t, td, key)
		var err error
		if r == nil {
			err = &NotLeaderError{}
		} else {
			err = fn(ctx, r)
		}
		if err == nil || !retryable(err, a, key, idempotent) || ctx.Err() != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// --- formatting ------------------------------------------------------------

func fmtKey(k []byte) string {
	if len(k) == 0 {
		return "-"
	}
	return string(k)
}

func fmtSpan(d *tidekvpb.RangeDescriptor) string {
	return fmt.Sprintf("[%s, %s)", fmtKey(d.GetStartKey()), fmtKey(d.GetEndKey()))
}

func fmtDesc(d *tidekvpb.RangeDescriptor) string {
	return fmt.Sprintf("r%d %s gen=%d %s", d.GetRangeId(), fmtSpan(d), d.GetGeneration(), FormatReplicas(d))
}

// fmtErr renders errors without the parts that vary from run to run
// (leader hints, wrapped context errors).
func fmtErr(err error) string {
	var nl *NotLeaderError
	var rnf *RangeNotFoundError
	var km *KeyMismatchError
	switch {
	case errors.As(err, &nl):
		return "error: not leaseholder"
	case errors.As(err, &km):
		return fmt.Sprintf("error: key mismatch: %q is outside r%d %s", km.Key, km.Desc.GetRangeId(), fmtSpan(km.Desc))
	case errors.As(err, &rnf):
		return "error: range not found"
	case errors.Is(err, ErrAmbiguous):
		return "error: ambiguous"
	}
	if s, ok := fmtTxnErr(err); ok {
		return "error: " + s
	}
	return "error: " + err.Error()
}

// --- commands --------------------------------------------------------------

// kvArgs returns the key=value arguments that are not options.
func kvArgs(td *datadriven.TestData, options ...string) []datadriven.CmdArg {
	var out []datadriven.CmdArg
outer:
	for _, a := range td.CmdArgs {
		for _, o := range options {
			if a.Key == o {
				continue outer
			}
		}
		out = append(out, a)
	}
	return out
}

func (d *ddDriver) put(t *testing.T, td *datadriven.TestData) string {
	var out strings.Builder
	for _, a := range kvArgs(td, "range", "node", "raw") {
		if len(a.Vals) != 1 {
			td.Fatalf(t, "put wants key=value, got %s", a)
		}
		op := &tidekvpb.WriteOp{Key: []byte(a.Key), Value: []byte(a.Vals[0])}
		err := d.do(t, td, op.Key, true, func(ctx context.Context, r *Replica) error {
			if td.HasArg("raw") {
				// Skip the request-path key check so the command reaches
				// the log and apply must refuse it.
				cmd := &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{{Key: op.Key, Value: op.Value}}}
				_, err := r.propose(ctx, cmd, nil)
				return err
			}
			_, err := r.Write(ctx, []*tidekvpb.WriteOp{op})
			return err
		})
		if err != nil {
			fmt.Fprintf(&out, "%s: %s\n", a.Key, fmtErr(err))
		}
	}
	if out.Len() == 0 {
		return "ok"
	}
	return out.String()
}

func (d *ddDriver) get(t *testing.T, td *datadriven.TestData) string {
	var ro ReadOptions
	var mode string
	td.MaybeScanArgs(t, "mode", &mode)
	switch mode {
	case "", "linearizable":
	case "any":
		ro.Mode = tidekvpb.ReadMode_ANY
	case "bounded":
		ro.Mode, ro.MaxStaleness = tidekvpb.ReadMode_BOUNDED, time.Second
		if td.HasArg("staleness") {
			var s string
			td.ScanArgs(t, "staleness", &s)
			var err error
			if ro.MaxStaleness, err = time.ParseDuration(s); err != nil {
				td.Fatalf(t, "staleness: %v", err)
			}
		}
	default:
		td.Fatalf(t, "unknown read mode %q", mode)
	}
	if td.HasArg("txn") {
		var id string
		td.ScanArgs(t, "txn", &id)
		ro.Txn = []byte(id)
	}
	if td.HasArg("settle") {
		return d.settle(td, func() string { return d.getKeys(t, td, ro) })
	}
	return d.getKeys(t, td, ro)
}

func (d *ddDriver) getKeys(t *testing.T, td *datadriven.TestData, ro ReadOptions) string {
	var out strings.Builder
	for _, a := range kvArgs(td, "range", "node", "mode", "staleness", "txn", "settle") {
		var v []byte
		var found bool
		err := d.do(t, td, []byte(a.Key), true, func(ctx context.Context, r *Replica) error {
			var err error
			v, found, err = r.Get(ctx, []byte(a.Key), ro)
			return err
		})
		switch {
		case err != nil:
			fmt.Fprintf(&out, "%s: %s\n", a.Key, fmtErr(err))
		case !found:
			fmt.Fprintf(&out, "%s: not found\n", a.Key)
		default:
			fmt.Fprintf(&out, "%s=%s\n", a.Key, v)
		}
	}
	return out.String()
}

func (d *ddDriver) batchGet(t *testing.T, td *datadriven.TestData) string {
	var ks [][]byte
	for _, a := range kvArgs(td, "range", "node") {
		ks = append(ks, []byte(a.Key))
	}
	var resps []*tidekvpb.GetResponse
	err := d.do(t, td, ks[0], true, func(ctx context.Context, r *Replica) error {
		var err error
		resps, err = r.BatchGet(ctx, ks, ReadOptions{})
		return err
	})
	if err != nil {
		return fmtErr(err)
	}
	var out strings.Builder
	for i, resp := range resps {
		if resp.GetFound() {
			fmt.Fprintf(&out, "%s=%s\n", ks[i], resp.GetValue())
		} else {
			fmt.Fprintf(&out, "%s: not found\n", ks[i])
		}
	}
	return out.String()
}

func (d *ddDriver) del(t *testing.T, td *datadriven.TestData) string {
	var out strings.Builder
	for _, a := range kvArgs(td, "range", "node") {
		op := &tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_DELETE, Key: []byte(a.Key)}
		var existed bool
		// Not idempotent: a retried delete would report the key absent.
		err := d.do(t, td, op.Key, false, func(ctx context.Context, r *Replica) error {
			var err error
			existed, err = r.Write(ctx, []*tidekvpb.WriteOp{op})
			return err
		})
		switch {
		case err != nil:
			fmt.Fprintf(&out, "%s: %s\n", a.Key, fmtErr(err))
		case existed:
			fmt.Fprintf(&out, "%s: deleted\n", a.Key)
		default:
			fmt.Fprintf(&out, "%s: was absent\n", a.Key)
		}
	}
	return out.String()
}

func (d *ddDriver) cas(t *testing.T, td *datadriven.TestData) string {
	var k string
	td.ScanArgs(t, "k", &k)
	req := &tidekvpb.CompareAndSetRequest{Key: []byte(k)}
	if td.HasArg("expect") {
		var v string
		td.ScanArgs(t, "expect", &v)
		req.ExpectExists, req.ExpectedValue = true, []byte(v)
	} else if !td.HasArg("absent") {
		td.Fatalf(t, "cas needs expect=V or absent")
	}
	if td.HasArg("new") {
		var v string
		td.ScanArgs(t, "new", &v)
		req.NewValue = []byte(v)
	} else if td.HasArg("delete") {
		req.Delete = true
	} else {
		td.Fatalf(t, "cas needs new=V or delete")
	}
	return d.sendCAS(t, td, req, "failed (current ")
}

// sendCAS sends req, a compare-and-set or an increment, to its key's
// leaseholder: "ok (was V)", or refused followed by the current value
// and ")".
func (d *ddDriver) sendCAS(t *testing.T, td *datadriven.TestData, req *tidekvpb.CompareAndSetRequest, refused string) string {
	var resp *tidekvpb.CompareAndSetResponse
	err := d.do(t, td, req.Key, false, func(ctx context.Context, r *Replica) error {
		var err error
		resp, err = r.CompareAndSet(ctx, req)
		return err
	})
	if err != nil {
		return fmtErr(err)
	}
	cur := "absent"
	if resp.GetCurrentExists() {
		cur = strconv.Quote(string(resp.GetCurrentValue()))
	}
	if resp.GetSucceeded() {
		return "ok (was " + cur + ")"
	}
	return refused + cur + ")"
}

// incr adds by=N to k's value in one increment command (Redis INCR).
func (d *ddDriver) incr(t *testing.T, td *datadriven.TestData) string {
	var k string
	var by int64
	td.ScanArgs(t, "k", &k)
	td.ScanArgs(t, "by", &by)
	req := &tidekvpb.CompareAndSetRequest{Key: []byte(k), Increment: true, IncrementBy: by, KeepTtl: true}
	return d.sendCAS(t, td, req, "refused (value ")
}

// scan reads like a client: range by range from the leaseholders, following
// resume keys, until the end or the limit. With range=R it asks that one
// range and prints the resume key it returned.
func (d *ddDriver) scan(t *testing.T, td *datadriven.TestData) string {
	var start, end string
	limit := 1000
	td.MaybeScanArgs(t, "start", &start)
	td.MaybeScanArgs(t, "end", &end)
	td.MaybeScanArgs(t, "limit", &limit)
	var out strings.Builder
	n := 0
	cur := []byte(start)
	for {
		var kvs []*tidekvpb.KeyValue
		var resume []byte
		err := d.do(t, td, cur, true, func(ctx context.Context, r *Replica) error {
			var err error
			kvs, resume, err = r.Scan(ctx, cur, []byte(end), limit-n, 1<<20, ReadOptions{})
			return err
		})
		if err != nil {
			fmt.Fprintf(&out, "%s\n", fmtErr(err))
			return out.String()
		}
		for _, kv := range kvs {
			fmt.Fprintf(&out, "%s=%s\n", kv.GetKey(), kv.GetValue())
		}
		n += len(kvs)
		if td.HasArg("range") || len(resume) == 0 || n >= limit {
			if len(resume) > 0 {
				fmt.Fprintf(&out, "resume at %q\n", resume)
			}
			break
		}
		cur = resume
	}
	if out.Len() == 0 {
		return "(empty)"
	}
	return out.String()
}
