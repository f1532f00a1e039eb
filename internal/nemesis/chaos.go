package nemesis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/launcher"
	"github.com/tidekv/tidekv/internal/linearizability"
)

// ChaosConfig is one chaos run: Schedules seeded fault plans, each on a
// fresh cluster of the real binary.
type ChaosConfig struct {
	Binary   string
	DataDir  string // each schedule uses a fresh directory under it
	BasePort int
	Seed     uint64 // schedule i uses Seed+i
	Faults   Config
	// Schedules is how many plans to run, one after another.
	Schedules int
	// Clients and Keys shape the linearizability workload.
	Clients, Keys int
	// ConvergeWithin bounds the wait, after the last fault, for every range
	// to be back at its replication factor (3) with no learner.
	ConvergeWithin time.Duration
	// CheckTimeout bounds the linearizability check of one history.
	CheckTimeout time.Duration
}

// DefaultChaosConfig runs one default plan on 4 nodes from port 27000.
func DefaultChaosConfig() ChaosConfig {
	return ChaosConfig{DataDir: os.TempDir(), BasePort: 27000, Seed: 1, Faults: DefaultConfig(), Schedules: 1,
		Clients: 8, Keys: 4, ConvergeWithin: 30 * time.Second, CheckTimeout: 2 * time.Minute}
}

// Validate reports the first setting that cannot work, in one sentence.
func (c ChaosConfig) Validate() error {
	switch {
	case c.Binary == "":
		return errors.New("chaos: no tidekv binary to run")
	case c.Schedules < 1 || c.Clients < 1 || c.Keys < 1:
		return errors.New("chaos: schedules, clients and keys must be at least 1")
	case c.Faults.Nodes < 3:
		return fmt.Errorf("chaos: %d nodes: the replication factor 3 needs at least 3", c.Faults.Nodes)
	case c.ConvergeWithin <= 0 || c.CheckTimeout <= 0:
		return errors.New("chaos: the convergence and check timeouts must be positive")
	}
	return c.Faults.Validate()
}

// Report is one schedule's outcome.
type Report struct {
	Seed       uint64 `json:"seed"`
	Kills      int    `json:"kills"`
	Pauses     int    `json:"pauses"`
	Partitions int    `json:"partitions"`
	Skews      int    `json:"skews"`
	SlowDisks  int    `json:"slow_disks"`
	Bridges    int    `json:"bridges"`
	Ops        int    `json:"ops"`
	OkOps      int    `json:"ok_ops"`
	// FinalReads is how many keys were read back after convergence; the
	// reads are part of the checked history, so an acknowledged write they
	// do not see is a linearizability violation.
	FinalReads   int     `json:"final_reads"`
	Linearizable bool    `json:"linearizable"`
	CheckedOps   int     `json:"checked_ops"`
	Converged    bool    `json:"converged"`
	ConvergedSec float64 `json:"converged_seconds"`
	Verdict      string  `json:"verdict"`
	Error        string  `json:"error,omitempty"`
}

// Passed reports whether the schedule found nothing wrong.
func (r Report) Passed() bool { return r.Error == "" && r.Linearizable && r.Converged }

// Chaos runs c.Schedules schedules and returns a report for each; progress
// lines go to logf.
func Chaos(ctx context.Context, c ChaosConfig, logf func(format string, args ...any)) ([]Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var out []Report
	for i := range c.Schedules {
		seed := c.Seed + uint64(i)
		rep := chaosOne(ctx, c, seed, logf)
		logf("schedule %d (seed %d): %s", i+1, seed, rep.Verdict)
		out = append(out, rep)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

func chaosOne(ctx context.Context, c ChaosConfig, seed uint64, logf func(string, ...any)) Report {
	rep := Report{Seed: seed}
	fail := func(err error) Report {
		rep.Error = err.Error()
		rep.Verdict = "error: " + rep.Error
		return rep
	}
	dir, err := os.MkdirTemp(c.DataDir, fmt.Sprintf("tidekv-chaos-%d-", seed))
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	lc, cl, err := startCluster(ctx, c, dir)
	if lc != nil {
		defer lc.Stop()
	}
	if err != nil {
		return fail(err)
	}
	defer cl.Close()

	steps := Plan(seed, c.Faults)
	for _, s := range steps {
		switch s.Kind {
		case Kill:
			rep.Kills++
		case Pause:
			rep.Pauses++
		case Partition:
			rep.Partitions++
		case Skew:
			rep.Skews++
		case SlowDisk:
			rep.SlowDisks++
		case Bridge:
			rep.Bridges++
		}
	}
	rec := linearizability.NewRecorder()
	keys := linearizability.Keys(c.Keys)
	stop := runWorkload(ctx, c, seed, cl, rec, keys, &rep)
	target, err := newLauncherTarget(ctx, lc, cl)
	if err != nil {
		return fail(err)
	}
	runErr := Run(ctx, steps, target, func(s Step) { logf("  seed %d: %s", seed, s) })
	took, convErr := awaitReplicated(ctx, cl, c.ConvergeWithin, true)
	stop()
	if runErr != nil {
		return fail(runErr)
	}
	// The last word on every key, after the workload: a lost acknowledged
	// write makes the history unlinearizable through these reads.
	if err := finalReads(ctx, cl, rec, c.Clients, keys); err != nil {
		return fail(err)
	}
	rep.FinalReads = len(keys)
	rep.Converged, rep.ConvergedSec = convErr == nil, took.Seconds()
	res := linearizability.Check(rec.History(), c.CheckTimeout)
	rep.Linearizable, rep.CheckedOps = res.Ok, res.Ops
	rep.Verdict = fmt.Sprintf("%d kills, %d pauses, %d partitions, %d skews, %d slow disks, %d bridges; %d ops (%d ok), %d final reads; %s; ",
		rep.Kills, rep.Pauses, rep.Partitions, rep.Skews, rep.SlowDisks, rep.Bridges, rep.Ops, rep.OkOps, rep.FinalReads, res.Describe)
	if convErr != nil {
		rep.Verdict += "NOT converged: " + convErr.Error()
	} else {
		rep.Verdict += fmt.Sprintf("converged %.1f s after the last fault", rep.ConvergedSec)
	}
	return rep
}

// startCluster starts c's cluster under dir and waits for full
// replication; the cluster is returned for stopping even with an error.
func startCluster(ctx context.Context, c ChaosConfig, dir string) (*launcher.Cluster, *client.Client, error) {
	lcfg := launcher.DefaultConfig()
	lcfg.Nodes, lcfg.DataDir, lcfg.BasePort, lcfg.Binary = c.Faults.Nodes, dir, c.BasePort, c.Binary
	if slices.ContainsFunc(c.Faults.Kinds, Kind.Injected) {
		lcfg.ExtraArgs = append(lcfg.ExtraArgs, "--enable-fault-injection")
	}
	lc, err := launcher.NewCluster(lcfg)
	if err != nil {
		return nil, nil, err
	}
	if err := lc.Start(ctx, nil); err != nil {
		return lc, nil, err
	}
	ccfg := client.DefaultConfig()
	for i := 1; i <= lcfg.Nodes; i++ {
		ccfg.Addrs = append(ccfg.Addrs, lcfg.Node(i).GRPCAddr)
	}
	cl, err := client.New(ccfg)
	if err != nil {
		return lc, nil, err
	}
	if _, err := awaitReplicated(ctx, cl, time.Minute, false); err != nil {
		cl.Close()
		return lc, nil, fmt.Errorf("the cluster never reached 3 voters per range: %w", err)
	}
	return lc, cl, nil
}

// runWorkload starts c.Clients linearizability clients recording into rec
// and counting into rep; the returned func stops them and waits.
func runWorkload(ctx context.Context, c ChaosConfig, seed uint64, cl *client.Client, rec *linearizability.Recorder, keys []string, rep *Report) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	do := linearizability.ClientDo(wctx, cl)
	for i := range c.Clients {
		w := linearizability.NewClient(i, rec, keys, seed)
		wg.Go(func() {
			for wctx.Err() == nil {
				res := w.Step(do)
				mu.Lock()
				rep.Ops++
				if res.Outcome == linearizability.OutcomeOk {
					rep.OkOps++
				}
				mu.Unlock()
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// finalReads reads every key once as client id, retrying a read that ends
// without an answer (a read changes nothing, so retrying is safe).
func finalReads(ctx context.Context, cl *client.Client, rec *linearizability.Recorder, id int, keys []string) error {
	do := linearizability.ClientDo(ctx, cl)
	for _, k := range keys {
		var res linearizability.Reply
		for range 5 {
			if res = rec.Run(id, linearizability.GetInput(k), do); res.Outcome == linearizability.OutcomeOk {
				break
			}
		}
		if res.Outcome != linearizability.OutcomeOk {
			return fmt.Errorf("final read of %s after recovery: %v", k, res.Err)
		}
	}
	return nil
}

// awaitReplicated polls the directory until every range has 3 voters and a
// leaseholder (and, if strict, nothing else: no learner, no joint state),
// for at most d; it returns how long that took.
func awaitReplicated(ctx context.Context, cl *client.Client, d time.Duration, strict bool) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last error
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cl.Ranges(rctx)
		rcancel()
		if err == nil {
			last = replicatedErr(resp, strict)
		} else {
			last = err
		}
		if last == nil {
			return time.Since(start), nil
		}
		if sleep(ctx, 200*time.Millisecond) != nil {
			return time.Since(start), last
		}
	}
}

func replicatedErr(resp *tidekvpb.RangesResponse, strict bool) error {
	if len(resp.GetRanges()) == 0 {
		return errors.New("no ranges reported")
	}
	for _, r := range resp.GetRanges() {
		d := r.GetDesc()
		voters := 0
		for _, rd := range d.GetReplicas() {
			switch {
			case rd.GetType() == tidekvpb.ReplicaType_VOTER:
				voters++
			case strict && !rd.GetAdaptive():
				return fmt.Errorf("range %d has a %v replica on node %d", d.GetRangeId(), rd.GetType(), rd.GetNodeId())
			}
		}
		if voters < 3 || (strict && voters != 3) {
			return fmt.Errorf("range %d has %d voters", d.GetRangeId(), voters)
		}
		if r.GetLeaderNodeId() == 0 {
			return fmt.Errorf("range %d has no known leaseholder", d.GetRangeId())
		}
	}
	return nil
}

// launcherTarget does faults to a launcher cluster's processes: signals,
// and partitions through each node's fault-injection endpoint.
type launcherTarget struct {
	lc   *launcher.Cluster
	http *http.Client
	ids  map[int]uint64 // launcher index -> node ID, for cutting links
}

// newLauncherTarget also learns each node's ID from the cluster's node
// list: a partition names peers by node ID, which join order decides.
func newLauncherTarget(ctx context.Context, lc *launcher.Cluster, cl *client.Client) (launcherTarget, error) {
	t := launcherTarget{lc: lc, http: &http.Client{Timeout: 5 * time.Second}, ids: map[int]uint64{}}
	resp, err := cl.Ranges(ctx)
	if err != nil {
		return t, fmt.Errorf("reading the node list: %w", err)
	}
	for i := 1; i <= lc.Config().Nodes; i++ {
		for _, n := range resp.GetNodes() {
			if n.GetGrpcAddr() == lc.Config().Node(i).GRPCAddr {
				t.ids[i] = n.GetNodeId()
			}
		}
	}
	return t, nil
}

func (t launcherTarget) CutLink(i, j int) error {
	ii, jj := t.ids[i], t.ids[j]
	if ii == 0 || jj == 0 {
		return fmt.Errorf("node %d or %d is not in the cluster's node list", i, j)
	}
	return errors.Join(t.partition(i, fmt.Sprint(jj)), t.partition(j, fmt.Sprint(ii)))
}

func (t launcherTarget) HealLink(i, j int) error { return errors.Join(t.Heal(i), t.Heal(j)) }

func (t launcherTarget) Kill(i int) error { return t.lc.KillNode(i) }

func (t launcherTarget) Restart(ctx context.Context, i int) error {
	_, err := t.lc.StartNode(ctx, i)
	return err
}

func (t launcherTarget) Pause(i int) error  { return t.signal(i, syscall.SIGSTOP) }
func (t launcherTarget) Resume(i int) error { return t.signal(i, syscall.SIGCONT) }

func (t launcherTarget) signal(i int, sig syscall.Signal) error {
	p := t.lc.Process(i)
	if p == nil || p.Exited() {
		return fmt.Errorf("node %d is not running", i)
	}
	return p.Signal(sig)
}

func (t launcherTarget) Isolate(i int) error { return t.partition(i, "all") }
func (t launcherTarget) Heal(i int) error    { return t.partition(i, "none") }

func (t launcherTarget) partition(i int, peers string) error {
	return SetPartition(t.http, t.lc.Config().Node(i).HTTPAddr, peers)
}

func (t launcherTarget) Skew(i int, d time.Duration) error {
	return postFault(t.http, t.lc.Config().Node(i).HTTPAddr, "skew?offset="+d.String())
}

func (t launcherTarget) SlowDisk(i int, d time.Duration) error {
	return postFault(t.http, t.lc.Config().Node(i).HTTPAddr, "disk?delay="+d.String())
}

// SetPartition asks the node serving HTTP at httpAddr (started with
// --enable-fault-injection) to cut its Raft traffic with peers: "all",
// "none" (heal) or node IDs like "2,3".
func SetPartition(hc *http.Client, httpAddr, peers string) error {
	return postFault(hc, httpAddr, "partition?peers="+url.QueryEscape(peers))
}

func postFault(hc *http.Client, httpAddr, what string) error {
	resp, err := hc.Post("http://"+httpAddr+"/debug/faults/"+what, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fault %s at %s: %s: %s", what, httpAddr, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
