package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/nemesis"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// reconfigRuns is how many seeded runs TestReconfigurationUnderKills makes
// and how long each lasts: one short run by default, the 20 × 60 s
// with TIDEKV_E2E_LONG=1, or TIDEKV_RECONFIG_RUNS / TIDEKV_RECONFIG_DURATION
// (TIDEKV_RECONFIG_SEED: the first run's seed, default 1).
func reconfigRuns(t *testing.T) (runs int, d time.Duration) {
	runs, d = 1, 24*time.Second
	if long() {
		runs, d = 20, 60*time.Second
	}
	if v := os.Getenv("TIDEKV_RECONFIG_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TIDEKV_RECONFIG_RUNS=%q: want a positive integer", v)
		}
		runs = n
	}
	if v := os.Getenv("TIDEKV_RECONFIG_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 10*time.Second {
			t.Fatalf("TIDEKV_RECONFIG_DURATION=%q: want a duration of at least 10s", v)
		}
	}
	return runs, d
}

// TestReconfigurationUnderKills drives a 4-node cluster (RF 3) the way an
// operator with a script might, through the public CLI only, while clients
// write and read: every second a random split, replica move or lease
// transfer, and every 8 s a SIGKILL of a random node, restarted 3 s later
// (a third of the faults a 3 s SIGSTOP pause instead; nemesis.Plan)
// (TIDEKV_RECONFIG_NONE=1: the kills and load only, for a throughput
// baseline).
// After the last fault every range must be back to RF voters with no
// leftover learner within 10 s, every acknowledged write must read back,
// and every failed ctl call must be a deliberate refusal of the cluster
// (an invalid request given a stale view), never "ambiguous", "overloaded"
// or a timeout.
func TestReconfigurationUnderKills(t *testing.T) {
	runs, d := reconfigRuns(t)
	first := uint64(1)
	if v := os.Getenv("TIDEKV_RECONFIG_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TIDEKV_RECONFIG_SEED=%q: want an unsigned integer", v)
		}
		first = n
	}
	for run := range runs {
		seed := first + uint64(run)
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { reconfigRun(t, seed, d) })
	}
}

// reconfigStats counts the chaos loop's ctl calls by outcome.
type reconfigStats struct {
	mu       sync.Mutex
	ok       map[string]int
	refused  map[string]int
	refusals []string
	failures []string
}

// record files a ctl call's outcome. A refusal is the cluster saying no
// on purpose, in one sentence: an invalid request (given the test's stale
// view of the layout: the node holds no replica, the key is a boundary
// already) or a precondition (the range is busy with another change).
func (s *reconfigStats) record(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch msg := fmt.Sprint(err); {
	case err == nil:
		s.ok[op]++
	case strings.Contains(msg, "invalid argument") || strings.Contains(msg, "FailedPrecondition"):
		s.refused[op]++
		if len(s.refusals) < 10 {
			s.refusals = append(s.refusals, msg)
		}
	default:
		s.failures = append(s.failures, msg)
	}
}

func reconfigRun(t *testing.T, seed uint64, d time.Duration) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 4})
	bin := testcluster.Binary(t)
	ctx := testCtx(t, d+3*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)
	allAddrs := strings.Join(tc.Addrs(), ",")

	load := plStartAckLoad(ctx, cl, "rc/", 4, 2)
	loadStart := time.Now()
	stats := &reconfigStats{ok: map[string]int{}, refused: map[string]int{}}

	// Reconfigurations: one a second from a seeded generator, through ctl,
	// with every node's address so the CLI can fail over.
	chaosCtx, stopChaos := context.WithTimeout(ctx, d)
	defer stopChaos()
	opRng := rand.New(rand.NewPCG(seed, 0xc0ffee))
	var ops sync.WaitGroup
	ops.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-chaosCtx.Done():
				return
			case <-tick.C:
			}
			resp, err := cl.Ranges(chaosCtx)
			if err != nil {
				continue
			}
			op, args := reconfigOp(opRng, resp, tc.N())
			if op == "" || os.Getenv("TIDEKV_RECONFIG_NONE") == "1" {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, _, err = ctl(cctx, bin, allAddrs, append([]string{op, "--timeout", "20s"}, args...)...)
			cancel()
			stats.record(op, err)
		}
	})

	// Faults: every 8 s a random node is SIGKILLed and restarted 3 s
	// later, or (a third of them) paused with SIGSTOP for 3 s: a hung node
	// that holds its connections open, like a partitioned one.
	faults := nemesis.DefaultConfig()
	faults.Duration, faults.Nodes = d, tc.N()
	faults.Kinds = []nemesis.Kind{nemesis.Kill, nemesis.Kill, nemesis.Pause}
	plan := nemesis.Plan(seed, faults)
	kills, pauses := 0, 0
	for _, s := range plan {
		if s.Kind == nemesis.Kill {
			kills++
		} else {
			pauses++
		}
	}
	lastFault, err := nemesis.Run(ctx, plan, testTarget{tc}, func(s nemesis.Step) { t.Logf("nemesis: %s", s) })
	if err != nil {
		t.Fatal(err)
	}
	ops.Wait()
	load.halt()
	// Throughput under the faults, to compare with TIDEKV_RECONFIG_NONE=1
	// (the same kills and load without reconfiguration).
	elapsed := time.Since(loadStart).Seconds()
	t.Logf("seed %d: load %.0f writes/s, %.0f reads/s over %.0f s", seed, float64(load.ackedCount())/elapsed, float64(load.reads.Load())/elapsed, elapsed)

	// Convergence: RF voters, no learner, a leaseholder everywhere.
	var converged time.Duration
	logged := false
	resp, err := plRanges(ctx, cl)
	for err = fmt.Errorf("not polled yet"); ; {
		if resp, err = plRanges(ctx, cl); err == nil {
			if err = plConverged(resp, 3); err == nil {
				converged = time.Since(lastFault)
				break
			}
		}
		if !logged && time.Since(lastFault) > 10*time.Second {
			t.Logf("not converged 10 s after the last fault: %v\n%s", err, plLayout(resp))
			logged = true
		}
		if time.Since(lastFault) > 60*time.Second {
			t.Fatalf("not converged 60 s after the last fault: %v\n%s", err, plLayout(resp))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("seed %d: %d kills, %d pauses; converged %v after the last fault; %d ranges", seed, kills, pauses, converged.Round(time.Millisecond), len(resp.GetRanges()))
	if converged > 10*time.Second {
		t.Errorf("converged %v after the last fault, want ≤ 10 s", converged.Round(time.Millisecond))
	}

	stats.mu.Lock()
	t.Logf("ctl calls: ok %v, refused %v, failed %d", stats.ok, stats.refused, len(stats.failures))
	for _, r := range stats.refusals {
		t.Logf("  refused: %s", r)
	}
	for _, f := range stats.failures {
		t.Errorf("ctl call failed (not a refusal): %s", f)
	}
	stats.mu.Unlock()
	load.verify(ctx, t, cl, "after reconfiguration under kills")
	reconfigNoStaleReplicas(ctx, t, tc, cl, 10*time.Second)
}

// reconfigOp picks a split, replica move or lease transfer from the
// current layout (which may be stale by the time it runs: that gives
// deliberate refusals, which the test tolerates).
func reconfigOp(rng *rand.Rand, resp *tidekvpb.RangesResponse, nodes int) (string, []string) {
	var user []*tidekvpb.RangeInfo
	for _, r := range resp.GetRanges() {
		if r.GetDesc().GetRangeId() != 1 {
			user = append(user, r)
		}
	}
	if len(user) == 0 {
		return "", nil
	}
	r := user[rng.IntN(len(user))]
	d := r.GetDesc()
	switch k := rng.IntN(3); {
	case k == 0 && len(resp.GetRanges()) < 40:
		// A key inside the load's key space (rc/w<writer>/<seq>).
		return "split", []string{fmt.Sprintf("rc/w%d/%06d", rng.IntN(4), rng.IntN(2000))}
	case k <= 1:
		var from, to []uint64
		for n := uint64(1); n <= uint64(nodes); n++ {
			if replicaOf(d, n) != nil {
				from = append(from, n)
			} else {
				to = append(to, n)
			}
		}
		if len(from) == 0 || len(to) == 0 {
			return "", nil
		}
		f, tgt := from[rng.IntN(len(from))], to[rng.IntN(len(to))]
		return "move-replica", []string{fmt.Sprint(d.GetRangeId()), fmt.Sprint(f), fmt.Sprint(tgt)}
	default:
		var vs []uint64
		for _, rd := range d.GetReplicas() {
			if rd.GetType() == tidekvpb.ReplicaType_VOTER && rd.GetNodeId() != r.GetLeaderNodeId() {
				vs = append(vs, rd.GetNodeId())
			}
		}
		if len(vs) == 0 {
			return "", nil
		}
		return "transfer-lease", []string{fmt.Sprint(d.GetRangeId()), fmt.Sprint(vs[rng.IntN(len(vs))])}
	}
}

func replicaOf(d *tidekvpb.RangeDescriptor, node uint64) *tidekvpb.ReplicaDescriptor {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == node {
			return rd
		}
	}
	return nil
}

// reconfigNoStaleReplicas waits (up to bound) until no node holds a
// replica of a range that the directory does not list on that node: a
// replica left behind by a move while its node was down must be removed.
func reconfigNoStaleReplicas(ctx context.Context, t *testing.T, tc *testcluster.Cluster, cl *client.Client, bound time.Duration) {
	t.Helper()
	err := eventually(ctx, bound, func(ctx context.Context) error {
		resp, err := plRanges(ctx, cl)
		if err != nil {
			return err
		}
		byID := map[uint64]*tidekvpb.RangeDescriptor{}
		for _, r := range resp.GetRanges() {
			byID[r.GetDesc().GetRangeId()] = r.GetDesc()
		}
		for i := 1; i <= tc.N(); i++ {
			ls, err := cl.LocalStatus(ctx, tc.Addr(i))
			if err != nil {
				return err
			}
			for _, rs := range ls.GetReplicas() {
				id := rs.GetRangeId()
				if id == 1 {
					continue // the meta range is not in the directory
				}
				if d := byID[id]; d == nil || replicaOf(d, tc.NodeID(i)) == nil {
					return fmt.Errorf("node %d still holds a replica of range %d (generation %d), which the directory does not list there", tc.NodeID(i), id, rs.GetGeneration())
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// testTarget does a nemesis plan's faults to a test cluster (from the test's
// goroutine: its methods fail the test on error).
type testTarget struct{ tc *testcluster.Cluster }

func (t testTarget) Kill(i int) error { t.tc.Kill(i); return nil }

func (t testTarget) Restart(_ context.Context, i int) error { t.tc.Restart(i); return nil }

func (t testTarget) Pause(i int) error { t.tc.Pause(i); return nil }

func (t testTarget) Resume(i int) error { t.tc.Resume(i); return nil }
