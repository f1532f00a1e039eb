package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// TestTransfersBetweenRanges: transactions through the real binary (in
// secure mode too: the coordinators' range-level steps are node-to-node
// calls): concurrent transfers between two accounts on two ranges keep
// their sum.
func TestTransfersBetweenRanges(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)
	if _, err := cl.Split(ctx, []byte("acct/b")); err != nil {
		t.Fatal(err)
	}
	a, b := []byte("acct/a"), []byte("acct/b")
	put(ctx, t, cl.Put, string(a), []byte("100"))
	put(ctx, t, cl.Put, string(b), []byte("100"))
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := range 5 {
				from, to := a, b
				if (w+i)%2 == 1 {
					from, to = b, a
				}
				if err := cl.Txn(ctx, func(tx *client.Tx) error { return transfer(ctx, tx, from, to, 1) }); err != nil {
					t.Errorf("transfer: %v", err)
				}
			}
		})
	}
	wg.Wait()
	va, vb := balance(ctx, t, cl, a), balance(ctx, t, cl, b)
	if va+vb != 200 {
		t.Fatalf("after the transfers a=%d b=%d: the sum is %d, want 200", va, vb, va+vb)
	}
}

func transfer(ctx context.Context, tx *client.Tx, from, to []byte, n int) error {
	var bal [2]int
	for i, k := range [][]byte{from, to} {
		v, err := tx.Get(ctx, k)
		if err != nil {
			return err
		}
		if bal[i], err = strconv.Atoi(string(v)); err != nil {
			return err
		}
	}
	if err := tx.Put(ctx, from, []byte(fmt.Sprint(bal[0]-n))); err != nil {
		return err
	}
	return tx.Put(ctx, to, []byte(fmt.Sprint(bal[1]+n)))
}

func balance(ctx context.Context, t *testing.T, cl *client.Client, k []byte) int {
	t.Helper()
	v, err := cl.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// benchTxnReport is what the tests read of `tidekv bench txn --json`.
type benchTxnReport struct {
	Committed, Aborted, Retries, Errors int64
	InvariantChecks                     int64  `json:"invariant_checks"`
	InvariantOK                         bool   `json:"invariant_ok"`
	InvariantError                      string `json:"invariant_error"`
}

// startBenchTxn starts `tidekv bench txn --json` with args against tc;
// wait waits for it to end and returns its report, failing the test if it
// failed or its report does not parse. progress is its stderr.
func startBenchTxn(ctx context.Context, t *testing.T, tc *testcluster.Cluster, args ...string) (wait func() benchTxnReport, progress *bytes.Buffer) {
	args = append(append([]string{"bench", "txn", "--addr", strings.Join(tc.Addrs(), ","), "--json", "--out", t.TempDir()}, args...),
		testcluster.CLIArgs()...)
	cmd := exec.CommandContext(ctx, testcluster.Binary(t), args...)
	var out bytes.Buffer
	progress = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &out, progress
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() benchTxnReport {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("bench txn %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), progress.String())
		}
		var res benchTxnReport
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("bench txn report: %v\n%s", err, out.String())
		}
		return res
	}, progress
}

// TestBenchTxn runs `tidekv bench txn` as a process against a 3-node
// cluster, bank then tpcc-lite: transactions commit, and every check of
// the workload's invariants, the final one included, passes.
func TestBenchTxn(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	ctx := testCtx(t, 3*time.Minute)
	waitReplicated(ctx, t, newClient(t, tc.Addrs()), 3)
	for _, workload := range [][]string{{"--workload", "bank", "--accounts", "20"}, {"--workload", "tpcc-lite", "--warehouses", "1"}} {
		wait, progress := startBenchTxn(ctx, t, tc, append(workload, "--duration", "3s")...)
		res := wait()
		t.Logf("%s: %d committed, %d aborted, %d retries, %d invariant checks", workload[1], res.Committed, res.Aborted, res.Retries, res.InvariantChecks)
		if !res.InvariantOK || res.Committed == 0 || res.InvariantChecks == 0 {
			t.Fatalf("%s: invariant ok %v (%s), %d committed, %d checks\n%s", workload[1], res.InvariantOK, res.InvariantError, res.Committed, res.InvariantChecks, progress.String())
		}
	}
}

// TestBankSurvivesKilledNode runs `tidekv bench txn --workload bank`
// against a 3-node cluster while one node, coordinator of some of its
// transactions and holder of replicas and leases, is SIGKILLed mid-run and
// restarted: every check of the total during the run and the final one
// pass (an interrupted transfer moved all of its amount or none of it),
// and transfers go on committing.
func TestBankSurvivesKilledNode(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	ctx := testCtx(t, 3*time.Minute)
	waitReplicated(ctx, t, newClient(t, tc.Addrs()), 3)
	wait, progress := startBenchTxn(ctx, t, tc, "--workload", "bank", "--accounts", "50", "--duration", "12s")
	time.Sleep(4 * time.Second)
	tc.Kill(2)
	time.Sleep(3 * time.Second)
	tc.Restart(2)
	res := wait()
	t.Logf("%d committed, %d aborted, %d failed, %d invariant checks", res.Committed, res.Aborted, res.Errors, res.InvariantChecks)
	if !res.InvariantOK || res.Committed == 0 || res.InvariantChecks < 5 {
		t.Fatalf("invariant ok %v (%s), %d committed, %d checks\n%s", res.InvariantOK, res.InvariantError, res.Committed, res.InvariantChecks, progress.String())
	}
}
