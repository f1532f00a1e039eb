package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/actuator/local"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/linearizability"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// autoscaleStatus reads the controller's status through the client.
func autoscaleStatus(ctx context.Context, cl *client.Client) (control.AutoscaleStatus, error) {
	var st control.AutoscaleStatus
	raw, err := cl.AutoscaleStatus(ctx)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(raw, &st)
}

// waitNodes waits until the controller reports want serving nodes and
// nothing pending.
func waitNodes(ctx context.Context, t *testing.T, cl *client.Client, want int, d time.Duration) {
	t.Helper()
	err := eventually(ctx, d, func(ctx context.Context) error {
		st, err := autoscaleStatus(ctx, cl)
		if err != nil {
			return err
		}
		if st.Nodes != want || st.PendingOut+st.PendingIn != 0 {
			return fmt.Errorf("%d nodes serving (%d starting, %d draining), target %d", st.Nodes, st.PendingOut, st.PendingIn, st.TargetNodes)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for %d nodes: %v", want, err)
	}
}

// `tidekv up --nodes 1 --autoscale` grows to the replication factor at
// once and beyond it under a load its SLO cannot take; once the load
// stops it shrinks back to the replication factor through a drain, with
// every range fully replicated. Clients run a checked history through
// the growth: it must be linearizable.
func TestAutoscaleGrowsAndShrinks(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	base := testcluster.FreeBasePort(t, 1)
	u := startUp(t, bin, dir, base, 1, "--autoscale", "--max-nodes", "4")
	ctx := testCtx(t, 5*time.Minute)
	cl := newClient(t, []string{u.nodes[1]["grpc"]})
	waitNodes(ctx, t, cl, 3, 60*time.Second)
	waitReplicated(ctx, t, cl, 3)
	// An SLO this machine cannot meet under the load below, and short
	// waits so the test sees a scale-in within a minute.
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		_, err := cl.Settings(ctx, map[string]string{"autoscale.slo-p99": "4ms", "autoscale.horizon": "5s",
			"autoscale.scale-in-after": "5s", "autoscale.cool-down": "5s"})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	keys := linearizability.Keys(8)
	rec := linearizability.NewRecorder()
	stats := &linearizability.Stats{}
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var wg sync.WaitGroup
	for i := range 16 {
		w := linearizability.NewClient(i, rec, keys, uint64(i))
		w.OnReply = func(in linearizability.Input, start time.Time, res linearizability.Reply) { stats.Record(in, start, res) }
		do := clientDo(wctx, cl)
		wg.Go(func() {
			for wctx.Err() == nil {
				w.Step(do)
			}
		})
	}
	waitNodes(ctx, t, cl, 4, 90*time.Second)
	time.Sleep(3 * time.Second) // operations on the grown cluster
	stopWorkers()
	wg.Wait()
	t.Logf("operations: %s", stats)

	waitNodes(ctx, t, cl, 3, 120*time.Second)
	waitReplicated(ctx, t, cl, 3)
	st, err := autoscaleStatus(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Decisions {
		t.Logf("%s %s %d→%d: %s", d.At.Format("15:04:05"), d.Action, d.NodesBefore, d.NodesAfter, d.Reason)
	}
	res := linearizability.CheckWithArtifacts(t, rec.History(), 3*time.Minute)
	if !res.Ok {
		t.Fatal("the history through the scale-out is not linearizable")
	}
	if res.Ops < 200 {
		t.Fatalf("only %d operations checked", res.Ops)
	}
	u.stop(t, dir)
	lc := local.DefaultConfig()
	lc.Dir = filepath.Join(dir, "autoscaled")
	act, err := local.New(lc)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := act.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Alive {
			t.Errorf("node%d (pid %d), started by the autoscaler, still runs after up stopped", n.Index, n.PID)
		}
	}
}
