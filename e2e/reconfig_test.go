package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/nemesis"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/testcluster"
	"github.com/tidekv/tidekv/internal/testutil/tier"
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
// and every failed ctl call must be one of the cluster's deliberate
// refusals of a request a stale view made invalid (reconfigRefusal),
// never "ambiguous", "overloaded" or a timeout.
func TestReconfigurationUnderKills(t *testing.T) {
	tier.RequireLong(t, "random replica changes under kills and pauses, about 35 s a seed")
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

// record files the outcome of the ctl call op with args. A refusal is one
// of reconfigRefusals; any other failure is a failure.
func (s *reconfigStats) record(op string, args []string, code int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch msg := fmt.Sprint(err); {
	case err == nil:
		s.ok[op]++
	case code == ctlFailure && reconfigRefusal(op, args, msg):
		s.refused[op]++
		if len(s.refusals) < 10 {
			s.refusals = append(s.refusals, msg)
		}
	default:
		s.failures = append(s.failures, msg)
	}
}

// ctlFailure is ctl's exit code for a failure other than a missing key.
const ctlFailure = 2

// reconfigRefusal reports whether msg, a failed ctl call's error, is one of
// the refusals the cluster makes on purpose to a request that the test's
// view of the layout, stale by the time the call runs, made invalid, each
// matched whole and naming the call's own key, range and nodes:
//   - split KEY: KEY is a range's start already (an earlier split took
//     it), or the range is busy
//     with a replica change that did not end within the split's wait
//     (FailedPrecondition, nothing done);
//   - move-replica RANGE FROM TO: FROM holds no replica of RANGE any more;
//     TO became a voter meanwhile, so only FROM's removal is left, and that
//     would go below the replication factor; TO holds an adaptive learner
//     (never promoted);
//   - transfer-lease RANGE NODE: NODE holds no voter of RANGE any more.
//
// Anything else (a timeout, an ambiguous result, overload, a node that is
// unavailable, the same refusal naming other nodes) is a failure.
func reconfigRefusal(op string, args []string, msg string) bool {
	invalid := regexp.QuoteMeta(client.ErrInvalidArgument.Error() + ": ")
	request := invalid + regexp.QuoteMeta(raftstore.ErrInvalidRequest.Error()+": ")
	var refusals []string
	switch a := args[len(args)-reconfigArgs[op]:]; op {
	case "split":
		refusals = []string{
			invalid + regexp.QuoteMeta(fmt.Sprintf("key %q is already the start of range ", a[0])) + `\d+`,
			regexp.QuoteMeta("tidekv: split: rpc error: code = "+codes.FailedPrecondition.String()+" desc = ") +
				`range \d+ is busy with a replica change \(waited [^)]+\); nothing was done, retry after it`,
		}
	case "move-replica":
		rng, from, to := a[0], a[1], a[2]
		refusals = []string{
			request + fmt.Sprintf("node %s holds no replica of range %s", from, rng),
			request + fmt.Sprintf(`removing node %s would leave range %s with \d+ voters, below the replication factor 3; add a replica first`, from, rng),
			request + fmt.Sprintf("node %s holds an adaptive learner of range %s, which is never promoted; remove it first", to, rng),
		}
	case "transfer-lease":
		refusals = []string{request + fmt.Sprintf("node %s holds no voter of range %s", a[1], a[0])}
	}
	// ctl's error: the command, its exit status, then the client's error.
	prefix := regexp.QuoteMeta(fmt.Sprintf("tidekv ctl %s: exit status %d: error: ", strings.Join(args, " "), ctlFailure))
	for _, r := range refusals {
		if regexp.MustCompile("^" + prefix + r + "$").MatchString(msg) {
			return true
		}
	}
	return false
}

// Only the cluster's own refusals of the call's own request pass, as the
// servers word them; the same refusal naming another node, or any other
// error, does not.
func TestReconfigRefusalsAreSpecific(t *testing.T) {
	move := []string{"move-replica", "--timeout", "20s", "7", "2", "4"}
	ctlErr := func(args []string, msg string) string {
		return fmt.Sprintf("tidekv ctl %s: exit status 2: error: %s", strings.Join(args, " "), msg)
	}
	split := []string{"split", "--timeout", "20s", "rc/w1/000042"}
	lease := []string{"transfer-lease", "--timeout", "20s", "7", "3"}
	for _, c := range []struct {
		args []string
		msg  string
		want bool
	}{
		{move, "tidekv: invalid argument: invalid request: node 2 holds no replica of range 7", true},
		{move, "tidekv: invalid argument: invalid request: node 3 holds no replica of range 7", false},
		{move, "tidekv: invalid argument: invalid request: removing node 2 would leave range 7 with 2 voters, below the replication factor 3; add a replica first", true},
		{move, "tidekv: invalid argument: invalid request: node 4 holds an adaptive learner of range 7, which is never promoted; remove it first", true},
		{move, "tidekv: invalid argument: node 4 is not a member of the cluster", false},
		{move, "tidekv: ambiguous result: the write may or may not have been applied: change replicas: EOF", false},
		{split, `tidekv: invalid argument: key "rc/w1/000042" is already the start of range 9`, true},
		{split, `tidekv: invalid argument: key "rc/w1/000043" is already the start of range 9`, false},
		{split, "tidekv: split: rpc error: code = FailedPrecondition desc = range 9 is busy with a replica change (waited 5s); nothing was done, retry after it", true},
		{split, "tidekv: split: rpc error: code = FailedPrecondition desc = the geo mode is off on this cluster", false},
		{lease, "tidekv: invalid argument: invalid request: node 3 holds no voter of range 7", true},
		{lease, "tidekv: invalid argument: invalid request: range 7 has no other voter to take the lease", false},
		{lease, "tidekv: transfer lease: context deadline exceeded", false},
	} {
		if got := reconfigRefusal(c.args[0], c.args, ctlErr(c.args, c.msg)); got != c.want {
			t.Errorf("%v: %q counted as a refusal: %v, want %v", c.args, c.msg, got, c.want)
		}
	}
}

// reconfigArgs is how many arguments each of the chaos loop's ctl commands
// takes after its flags.
var reconfigArgs = map[string]int{"split": 1, "move-replica": 3, "transfer-lease": 2}

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
			argv := append([]string{op, "--timeout", "20s"}, args...)
			_, code, err := ctl(cctx, bin, allAddrs, argv...)
			cancel()
			stats.record(op, argv, code, err)
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
