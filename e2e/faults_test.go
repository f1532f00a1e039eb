package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/linearizability"
	"github.com/tidekv/tidekv/internal/nemesis"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// TestPartitionedLeaseholder cuts the leaseholder of the workload's range
// off from its peers (real processes, --enable-fault-injection), while
// clients that can still reach every node run a linearizability workload:
// the cut node must give up its leases, the majority must elect a new
// leaseholder and keep acknowledging writes, and after healing the whole
// history, final reads included, must be linearizable.
func TestPartitionedLeaseholder(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--enable-fault-injection"}})
	ctx := testCtx(t, 3*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)
	keys := linearizability.Keys(4)
	resp, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := rangeFor(resp, []byte(keys[0]))
	if r == nil {
		t.Fatalf("no range covers %s", keys[0])
	}
	victimID := r.GetLeaderNodeId()
	victim := tc.IndexOf(victimID)
	if victim == 0 {
		t.Fatalf("range %d's leaseholder n%d is not a test node", r.GetDesc().GetRangeId(), victimID)
	}

	rec := linearizability.NewRecorder()
	okWrites, stop := writeWorkload(ctx, cl, rec, keys, 6)
	faults := nemesis.NewFaultEndpoint(testcluster.ClientTLS(t))
	hc := testcluster.HTTPClient(t, 5*time.Second)
	time.Sleep(time.Second)
	t.Logf("isolating node %d (n%d), leaseholder of range %d", victim, victimID, r.GetDesc().GetRangeId())
	if err := faults.SetPartition(tc.HTTPAddr(victim), "all"); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	// CheckQuorum makes the cut leader step down within an election
	// timeout (1 s); its lease, half that, is gone before.
	err = eventually(ctx, 10*time.Second, func(context.Context) error {
		if n, err := leases(hc, tc.HTTPAddr(victim)); err != nil || n != 0 {
			return fmt.Errorf("the cut node still leads %d ranges (%v)", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the cut node leads no range %v after the cut", time.Since(cut).Round(time.Millisecond))
	err = eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		resp, err := cl.Ranges(ctx)
		if err != nil {
			return err
		}
		if lh := rangeFor(resp, []byte(keys[0])).GetLeaderNodeId(); lh == victimID || lh == 0 {
			return fmt.Errorf("the workload's range has leaseholder n%d", lh)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before := okWrites.Load()
	time.Sleep(3 * time.Second)
	during := okWrites.Load() - before
	if err := faults.SetPartition(tc.HTTPAddr(victim), "none"); err != nil {
		t.Fatal(err)
	}
	t.Logf("healed after %v; %d writes acknowledged in the last 3 s of the partition", time.Since(cut).Round(time.Millisecond), during)
	if during < 20 {
		t.Errorf("the majority acknowledged only %d writes in 3 s while the leaseholder was cut off", during)
	}
	time.Sleep(2 * time.Second)
	stop()
	waitReplicated(ctx, t, cl, 3)
	final := linearizability.ClientDo(ctx, cl)
	for _, k := range keys {
		if res := rec.Run(6, linearizability.GetInput(k), final); res.Outcome != linearizability.OutcomeOk {
			t.Fatalf("final read of %s: %v", k, res.Err)
		}
	}
	if res := linearizability.CheckWithArtifacts(t, rec.History(), 2*time.Minute); !res.Ok {
		t.Fatalf("the history across the partition is not linearizable: %s", res.Describe)
	}
}

// writeWorkload runs n linearizability clients through cl into rec and
// counts their acknowledged writes; stop ends them and waits.
func writeWorkload(ctx context.Context, cl *client.Client, rec *linearizability.Recorder, keys []string, n int) (okWrites *atomic.Int64, stop func()) {
	okWrites = new(atomic.Int64)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	send := linearizability.ClientDo(wctx, cl)
	do := func(in linearizability.Input) linearizability.Reply {
		res := send(in)
		if in.Kind != linearizability.Get && res.Outcome == linearizability.OutcomeOk {
			okWrites.Add(1)
		}
		return res
	}
	for i := range n {
		w := linearizability.NewClient(i, rec, keys, 13)
		wg.Go(func() {
			for wctx.Err() == nil {
				w.Step(do)
			}
		})
	}
	return okWrites, func() { cancel(); wg.Wait() }
}

// leases reads the tidekv_leases gauge (ranges the node leads) from a
// node's /metrics.
func leases(hc *http.Client, httpAddr string) (int, error) {
	v, err := metric(hc, httpAddr, "tidekv_leases")
	return int(v), err
}

// metric reads an unlabelled metric from a node's /metrics.
func metric(hc *http.Client, httpAddr, name string) (float64, error) {
	resp, err := hc.Get(testcluster.HTTPURL(httpAddr, "/metrics"))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s/metrics", name, httpAddr)
}

// TestInjectedSlowDisk checks that --enable-fault-injection's slow disk
// reaches the engine of a real process: with every node's syncs delayed, a
// write (synced on a quorum) takes at least the delay, and is fast again
// once the delay is removed.
func TestInjectedSlowDisk(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--enable-fault-injection"}})
	ctx := testCtx(t, 2*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)
	put := func() time.Duration {
		t.Helper()
		start := time.Now()
		if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error { return cl.Put(ctx, []byte("slow"), []byte("v")) }); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	put()
	hc := testcluster.HTTPClient(t, 5*time.Second)
	setDelay := func(d time.Duration) {
		t.Helper()
		for i := 1; i <= 3; i++ {
			resp, err := hc.Post(testcluster.HTTPURL(tc.HTTPAddr(i), "/debug/faults/disk?delay="+d.String()), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("slowing node %d's disk: %s", i, resp.Status)
			}
		}
	}
	const delay = 300 * time.Millisecond
	setDelay(delay)
	if took := put(); took < delay {
		t.Fatalf("a write with every disk slowed by %v took %v", delay, took)
	}
	setDelay(0)
	var fast time.Duration
	for range 3 {
		if fast = put(); fast < delay {
			return
		}
	}
	t.Fatalf("writes still take %v after the disks recovered", fast)
}

// TestInjectedDiskFailure fails one node's disk under writes: the node
// must stop at its next write (never run on, or acknowledge, what its
// disk did not keep), the other two keep acknowledging writes, and once
// restarted on its disk, healthy again, the node catches up; every
// acknowledged write is read back.
func TestInjectedDiskFailure(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{"--enable-fault-injection"}})
	ctx := testCtx(t, 3*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)
	acked := map[string]string{}
	put := func(i int) {
		t.Helper()
		k, v := fmt.Sprintf("disk-%04d", i), fmt.Sprintf("v%d", i)
		if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error { return cl.Put(ctx, []byte(k), []byte(v)) }); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		acked[k] = v
	}
	for i := range 20 {
		put(i)
	}
	if err := nemesis.NewFaultEndpoint(testcluster.ClientTLS(t)).FailDisk(tc.HTTPAddr(3)); err != nil {
		t.Fatal(err)
	}
	n := 20
	for deadline := time.Now().Add(30 * time.Second); tc.Node(3).Running(); n++ {
		if time.Now().After(deadline) {
			t.Fatalf("node 3 still runs 30 s after its disk failed, through %d writes", n-20)
		}
		put(n)
	}
	if log := tc.Node(3).LogTail(); !strings.Contains(log, "injected disk failure") {
		t.Fatalf("node 3 stopped without naming its disk failure:\n%s", log)
	}
	t.Logf("node 3 stopped on its failed disk after %d more writes", n-20)
	for i := n; i < n+20; i++ {
		put(i) // the two others keep a quorum
	}
	tc.Restart(3)
	waitReplicated(ctx, t, cl, 3)
	if err := eventually(ctx, 30*time.Second, func(ctx context.Context) error { return caughtUp(ctx, cl, tc.Addr(3), tc.Addr(2)) }); err != nil {
		t.Fatalf("node 3 after its restart: %v", err)
	}
	// With node 1 stopped every write needs node 3.
	tc.Stop(1)
	put(n + 20)
	for k, v := range acked {
		var got []byte
		err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
			var err error
			got, err = cl.Get(ctx, []byte(k))
			return err
		})
		if err != nil || string(got) != v {
			t.Fatalf("get %s after the restart: %q, %v; want %q", k, got, err, v)
		}
	}
}

// caughtUp reports whether the node at addr has applied, for every range
// it holds, at least what the node at ref has.
func caughtUp(ctx context.Context, cl *client.Client, addr, ref string) error {
	mine, err := cl.LocalStatus(ctx, addr)
	if err != nil {
		return err
	}
	theirs, err := cl.LocalStatus(ctx, ref)
	if err != nil {
		return err
	}
	applied := map[uint64]uint64{}
	for _, r := range mine.GetReplicas() {
		applied[r.GetRangeId()] = r.GetAppliedIndex()
	}
	for _, r := range theirs.GetReplicas() {
		if got, ok := applied[r.GetRangeId()]; !ok || got < r.GetAppliedIndex() {
			return fmt.Errorf("range %d applied at %d there, %d (held: %v) here", r.GetRangeId(), r.GetAppliedIndex(), got, ok)
		}
	}
	return nil
}
