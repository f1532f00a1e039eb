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

// TestBenchTxnBank runs `tidekv bench txn --workload bank` as a process
// against a 3-node cluster: transfers commit, and every check of the
// accounts' total, the final one included, sees it.
func TestBenchTxnBank(t *testing.T) {
	bin := testcluster.Binary(t)
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	ctx := testCtx(t, 3*time.Minute)
	waitReplicated(ctx, t, newClient(t, tc.Addrs()), 3)
	args := append([]string{"bench", "txn", "--addr", strings.Join(tc.Addrs(), ","), "--workload", "bank",
		"--accounts", "20", "--duration", "3s", "--json", "--out", t.TempDir()}, testcluster.CLIArgs()...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, progress bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &progress
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench txn: %v\n%s%s", err, out.String(), progress.String())
	}
	var res struct {
		Committed, Aborted, Retries int64
		InvariantChecks             int64  `json:"invariant_checks"`
		InvariantOK                 bool   `json:"invariant_ok"`
		InvariantError              string `json:"invariant_error"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("report: %v\n%s", err, out.String())
	}
	t.Logf("%d committed, %d aborted, %d retries, %d invariant checks", res.Committed, res.Aborted, res.Retries, res.InvariantChecks)
	if !res.InvariantOK || res.Committed == 0 || res.InvariantChecks == 0 {
		t.Fatalf("invariant ok %v (%s), %d committed, %d checks\n%s", res.InvariantOK, res.InvariantError, res.Committed, res.InvariantChecks, progress.String())
	}
}
