package nemesis

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/launcher"
	"github.com/tidekv/tidekv/internal/linearizability"
	"github.com/tidekv/tidekv/internal/security"
	"github.com/tidekv/tidekv/internal/txncheck"
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
	// ConvergeWithin bounds the wait, once the plan has run, for every
	// range to be back at its replication factor (3) with no learner; the
	// report's figure counts from the moment the last fault was lifted.
	ConvergeWithin time.Duration
	// CheckTimeout bounds the linearizability check of one history.
	CheckTimeout time.Duration
	// Workload is what the clients run: "kv" (or ""), single-key
	// operations whose history must be linearizable; "txn", transactions
	// (TxnWorkload) through the Go client's Txn whose history must show
	// no anomaly (txncheck); "txn-resp", the same transactions as a Redis
	// user writes them, MULTI/EXEC (and WATCH) over RESP.
	Workload    string
	TxnWorkload txncheck.Workload
	// Break, with the txn workload, is every node's --testing-break: a
	// deliberately broken transaction mode (raftstore.Breaks), which the
	// check must catch.
	Break string
	// ClientLag sets the workload client's wall clock this far behind the
	// nodes' (0: the same). Beyond the nodes' max offset no answer moves
	// its clock on, so every read timestamp it proposes is stale: the
	// cluster must not read at it (--break client-clock does).
	ClientLag time.Duration
	// MinOK makes the workload run on after the schedule (and the wait
	// for convergence) until this many of its operations (transactions)
	// succeeded, for at most minOKWithin more (0: it stops with the
	// schedule). The faults still fall on what runs during the schedule;
	// a starved machine that ran little then still gives the check a
	// history of this size, one the operations after the last fault read
	// into, instead of failing a floor that was a rate.
	MinOK int
	// CertsDir, when set, runs secure clusters: every node gets it as
	// --certs-dir and UsersFile as --users-file, and the run reaches them
	// as root (client.root.crt in it) and its fault endpoints over HTTPS.
	CertsDir, UsersFile string
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
	case c.Faults.Nodes < 4 && slices.ContainsFunc(c.Faults.Kinds, Kind.Relocates):
		return fmt.Errorf("chaos: %d nodes: moves and churn need a node beyond the replication factor 3 to move replicas to", c.Faults.Nodes)
	case c.ConvergeWithin <= 0 || c.CheckTimeout <= 0:
		return errors.New("chaos: the convergence and check timeouts must be positive")
	case c.Workload != "" && c.Workload != "kv" && !c.transactional():
		return fmt.Errorf("chaos: unknown workload %q (kv, txn or txn-resp)", c.Workload)
	case c.Break != "" && !c.transactional():
		return errors.New("chaos: a break is of transactions: it needs the txn or txn-resp workload")
	case c.Workload == "txn-resp" && c.CertsDir != "":
		return errors.New("chaos: the txn-resp workload runs on insecure clusters only (it sends no Redis password)")
	case c.MinOK < 0:
		return errors.New("chaos: the successful operations to run on for must not be negative")
	case c.ClientLag < 0:
		return errors.New("chaos: the client's clock lag must not be negative")
	case c.UsersFile != "" && c.CertsDir == "":
		return errors.New("chaos: a users file needs a certs dir: insecure nodes authenticate no one")
	}
	return c.Faults.Validate()
}

// transactional reports whether the workload runs transactions, checked
// by txncheck.
func (c ChaosConfig) transactional() bool { return c.Workload == "txn" || c.Workload == "txn-resp" }

// Report is one schedule's outcome.
type Report struct {
	Seed       uint64 `json:"seed"`
	Kills      int    `json:"kills"`
	Pauses     int    `json:"pauses"`
	Partitions int    `json:"partitions"`
	Skews      int    `json:"skews"`
	// SkewsBeyond are the skews beyond the nodes' max offset (the
	// default, hlc.DefaultMaxOffset), SkewsRefused those whose node the
	// cluster's status showed untrusted and then leading no range: such a
	// node must refuse to serve, not produce anomalies.
	SkewsBeyond  int `json:"skews_beyond_max_offset"`
	SkewsRefused int `json:"skews_refused"`
	SlowDisks    int `json:"slow_disks"`
	Bridges      int `json:"bridges"`
	Splits       int `json:"splits"`
	// Moves is how many moves were asked of the cluster (a fault may
	// refuse them; a move off a node with no voter to move is skipped),
	// MovesOK how many it made; Churns is how many decommissions were
	// planned, each recommissioned.
	Moves   int `json:"moves"`
	MovesOK int `json:"moves_ok"`
	Churns  int `json:"churns"`
	// DiskFails is how many disks were failed, DiskFailStops how many of
	// them stopped their node by themselves (the others had no write to
	// fail on, and were killed).
	DiskFails     int `json:"disk_fails"`
	DiskFailStops int `json:"disk_fail_stops"`
	// Replaced is how many nodes were wiped and started afresh.
	Replaced int `json:"replaced"`
	// RangeSplits, Merges and LeaseTransfers are the layout operations
	// asked of the cluster and those made (seen in the range directory
	// afterwards); a fault may refuse them.
	RangeSplits    LayoutCounts `json:"range_splits"`
	Merges         LayoutCounts `json:"merges"`
	LeaseTransfers LayoutCounts `json:"lease_transfers"`
	// Workload and Break are the run's (ChaosConfig).
	Workload string `json:"workload"`
	Break    string `json:"break,omitempty"`
	// Ops are the operations (transactions, for the txn workload) the
	// clients ran, OkOps those that succeeded (committed).
	Ops   int `json:"ops"`
	OkOps int `json:"ok_ops"`
	// FinalReads is how many keys were read back after convergence; the
	// reads are part of the checked history, so an acknowledged write they
	// do not see is a linearizability violation.
	FinalReads   int  `json:"final_reads"`
	Linearizable bool `json:"linearizable"`
	CheckedOps   int  `json:"checked_ops"`
	// Committed, Anomalies and AnomalyKinds are the txn workload's check
	// (txncheck): committed transactions, final reads included; the
	// anomalies found, their kinds, and the smallest explained.
	Committed       int      `json:"committed"`
	Anomalies       int      `json:"anomalies"`
	AnomalyKinds    []string `json:"anomaly_kinds"`
	SmallestAnomaly string   `json:"smallest_anomaly,omitempty"`
	// ConvergedSec is how long after the last fault was lifted (a killed
	// node's process started again, not ready yet; a pause resumed; a cut
	// healed) every range was back at 3 voters with a leaseholder.
	Converged    bool    `json:"converged"`
	ConvergedSec float64 `json:"converged_seconds"`
	Verdict      string  `json:"verdict"`
	Error        string  `json:"error,omitempty"`
}

// Passed reports whether the schedule found nothing wrong: with a break,
// that its anomalies were found.
func (r Report) Passed() bool {
	if r.Error != "" || !r.Converged {
		return false
	}
	switch {
	case r.Break != "":
		return r.Anomalies > 0
	case r.Workload == "txn" || r.Workload == "txn-resp":
		return r.Anomalies == 0
	}
	return r.Linearizable
}

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
	rep.count(steps)
	rep.Workload, rep.Break = cmp.Or(c.Workload, "kv"), c.Break
	var w chaosWorkload = &linzWorkload{c: c, seed: seed, rec: linearizability.NewRecorder(), keys: linearizability.Keys(c.Keys)}
	switch c.Workload {
	case "txn":
		w = newTxnWorkload(c.TxnWorkload, c.Keys, c.Clients, seed, goTxns{cl: cl, kind: c.TxnWorkload})
	case "txn-resp":
		var addrs []string
		for i := 1; i <= c.Faults.Nodes; i++ {
			addrs = append(addrs, lc.Config().Node(i).RedisAddr)
		}
		rt := newRespTxns(c.TxnWorkload, addrs, c.Clients+1) // the final reads' process too
		defer rt.Close()
		w = newTxnWorkload(c.TxnWorkload, c.Keys, c.Clients, seed, rt)
	}
	var ops tally
	stop, err := w.start(ctx, cl, &ops)
	if err != nil {
		return fail(err)
	}
	target, err := newLauncherTarget(ctx, lc, cl, c, w.keySpace(), logf)
	if err != nil {
		return fail(err)
	}
	lifted, runErr := Run(ctx, steps, target, func(s Step) { logf("  seed %d: %s", seed, s) })
	rep.Moves, rep.MovesOK = target.ops.moves, target.ops.movesOK
	rep.DiskFails, rep.DiskFailStops, rep.Replaced = target.ops.diskFails, target.ops.diskStops, target.ops.replaced
	rep.RangeSplits, rep.Merges, rep.LeaseTransfers = target.ops.layout[RangeSplit], target.ops.layout[Merge], target.ops.layout[LeaseTransfer]
	rep.SkewsBeyond, rep.SkewsRefused = target.ops.skewsBeyond, target.ops.skewsRefused
	if lifted.IsZero() {
		lifted = time.Now() // a plan with no step: nothing to recover from
	}
	took, convErr := awaitReplicated(ctx, cl, lifted, c.ConvergeWithin, true)
	ranOn := ops.awaitOK(ctx, c.MinOK, minOKWithin)
	stop()
	rep.Ops, rep.OkOps = ops.counts()
	if runErr != nil {
		return fail(runErr)
	}
	// The last word on every key, after the workload: a lost acknowledged
	// write shows in the check through these reads.
	verdict, err := w.finish(ctx, cl, &rep)
	if err != nil {
		return fail(err)
	}
	rep.Converged, rep.ConvergedSec = convErr == nil, took.Seconds()
	rep.Verdict = fmt.Sprintf("%d kills, %d pauses, %d partitions, %d skews (%d beyond the max offset, %d refused), %d slow disks, %d failed disks (%d stopped their node), %d replaced, %d bridges, %d splits; %d moves (%d made), %d churns, %d range splits (%d made), %d merges (%d made), %d lease transfers (%d made); %d ops (%d ok), %d final reads; %s; ",
		rep.Kills, rep.Pauses, rep.Partitions, rep.Skews, rep.SkewsBeyond, rep.SkewsRefused, rep.SlowDisks, rep.DiskFails, rep.DiskFailStops, rep.Replaced, rep.Bridges, rep.Splits, rep.Moves, rep.MovesOK, rep.Churns,
		rep.RangeSplits.Asked, rep.RangeSplits.Made, rep.Merges.Asked, rep.Merges.Made, rep.LeaseTransfers.Asked, rep.LeaseTransfers.Made,
		rep.Ops, rep.OkOps, rep.FinalReads, verdict)
	if c.MinOK > 0 {
		rep.Verdict += fmt.Sprintf("ran on %.1f s after the schedule for %d successful operations; ", ranOn.Seconds(), c.MinOK)
	}
	if convErr != nil {
		rep.Verdict += "NOT converged: " + convErr.Error()
	} else {
		rep.Verdict += fmt.Sprintf("converged %.1f s after the last fault ended", rep.ConvergedSec)
	}
	return rep
}

// count counts the plan's steps by kind; moves are counted as they run.
func (r *Report) count(steps []Step) {
	for _, s := range steps {
		switch s.Kind {
		case Kill:
			r.Kills++
		case Pause:
			r.Pauses++
		case Partition:
			r.Partitions++
		case Skew:
			r.Skews++
		case SlowDisk:
			r.SlowDisks++
		case Bridge:
			r.Bridges++
		case Split:
			r.Splits++
		case Churn:
			r.Churns++
		}
	}
}

// minDeadNodeGrace is above the servers' default liveness timeout (5 s):
// a grace at or below it is refused at start.
const minDeadNodeGrace = 6 * time.Second

// startCluster starts c's cluster under dir and waits for full
// replication; the cluster is returned for stopping even with an error.
func startCluster(ctx context.Context, c ChaosConfig, dir string) (*launcher.Cluster, *client.Client, error) {
	lcfg := launcher.DefaultConfig()
	lcfg.Nodes, lcfg.DataDir, lcfg.BasePort, lcfg.Binary = c.Faults.Nodes, dir, c.BasePort, c.Binary
	if slices.ContainsFunc(c.Faults.Kinds, Kind.Injected) {
		lcfg.ExtraArgs = append(lcfg.ExtraArgs, "--enable-fault-injection")
	}
	if c.Break != "" {
		lcfg.ExtraArgs = append(lcfg.ExtraArgs, "--testing-break", c.Break)
	}
	if slices.Contains(c.Faults.Kinds, Replace) {
		// A replaced node's old ID must be found dead, and its replicas
		// re-created, within the run: twice a fault's length, which no
		// other fault keeps a live node silent for; and above the
		// servers' liveness timeout, which they refuse to start without.
		grace := max(2*c.Faults.Down, minDeadNodeGrace)
		lcfg.ExtraArgs = append(lcfg.ExtraArgs, "--dead-node-grace", grace.String())
	}
	ccfg := client.DefaultConfig()
	ccfg.WallClock = laggingClock(c.ClientLag)
	if c.CertsDir != "" {
		var err error
		if ccfg.TLS, err = chaosTLS(c.CertsDir); err != nil {
			return nil, nil, err
		}
		lcfg.HTTPTLS = ccfg.TLS
		lcfg.ExtraArgs = append(lcfg.ExtraArgs, "--certs-dir", c.CertsDir, "--users-file", c.UsersFile)
	}
	lc, err := launcher.NewCluster(lcfg)
	if err != nil {
		return nil, nil, err
	}
	if err := lc.Start(ctx, nil); err != nil {
		return lc, nil, err
	}
	for i := 1; i <= lcfg.Nodes; i++ {
		ccfg.Addrs = append(ccfg.Addrs, lcfg.Node(i).GRPCAddr)
	}
	cl, err := client.New(ccfg)
	if err != nil {
		return lc, nil, err
	}
	if _, err := awaitReplicated(ctx, cl, time.Now(), time.Minute, false); err != nil {
		cl.Close()
		return lc, nil, fmt.Errorf("the cluster never reached 3 voters per range: %w", err)
	}
	return lc, cl, nil
}

// chaosTLS loads what reaches a secure cluster as root, on its gRPC and
// HTTP ports alike: root is an admin, as moves, churn and the fault
// endpoint need.
func chaosTLS(dir string) (*tls.Config, error) {
	tc, hasCert, err := security.LoadClientTLS(security.OSFiles{}, dir, security.RootUser)
	if err == nil && !hasCert {
		err = fmt.Errorf("chaos: no %s in %s: the run acts as root", security.ClientCert(security.RootUser), dir)
	}
	return tc, err
}

// chaosWorkload is what the clients of a schedule run: started before
// the faults, finished after recovery with final reads and the check of
// the history, whose description it returns.
type chaosWorkload interface {
	// keySpace is the keys the clients use, among which layout
	// operations split, merge and move leases.
	keySpace() []string
	start(ctx context.Context, cl *client.Client, ops *tally) (stop func(), err error)
	finish(ctx context.Context, cl *client.Client, rep *Report) (string, error)
}

// linzWorkload is the kv workload: single-key operations checked for
// linearizability by porcupine.
type linzWorkload struct {
	c    ChaosConfig
	seed uint64
	rec  *linearizability.Recorder
	keys []string
}

func (w *linzWorkload) keySpace() []string { return w.keys }

func (w *linzWorkload) start(ctx context.Context, cl *client.Client, ops *tally) (func(), error) {
	return runWorkload(ctx, w.c, w.seed, cl, w.rec, w.keys, ops), nil
}

func (w *linzWorkload) finish(ctx context.Context, cl *client.Client, rep *Report) (string, error) {
	if err := finalReads(ctx, cl, w.rec, w.c.Clients, w.keys); err != nil {
		return "", err
	}
	rep.FinalReads = len(w.keys)
	res := linearizability.Check(w.rec.History(), w.c.CheckTimeout)
	rep.Linearizable, rep.CheckedOps = res.Ok, res.Ops
	return res.Describe, nil
}

// runWorkload starts c.Clients linearizability clients recording into rec
// and counting into ops; the returned func stops them and waits.
func runWorkload(ctx context.Context, c ChaosConfig, seed uint64, cl *client.Client, rec *linearizability.Recorder, keys []string, ops *tally) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	do := linearizability.ClientDo(wctx, cl)
	for i := range c.Clients {
		w := linearizability.NewClient(i, rec, keys, seed)
		wg.Go(func() {
			for wctx.Err() == nil {
				ops.add(w.Step(do).Outcome == linearizability.OutcomeOk)
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// minOKWithin bounds how long a workload runs on after its schedule for
// ChaosConfig.MinOK successful operations: a cluster that has stopped
// serving ends the run with fewer.
const minOKWithin = time.Minute

// tally counts a workload's operations as its clients end them.
type tally struct {
	mu      sync.Mutex
	ops, ok int
}

func (t *tally) add(ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ops++
	if ok {
		t.ok++
	}
}

// counts is the operations ended and those of them that succeeded.
func (t *tally) counts() (ops, ok int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ops, t.ok
}

// awaitOK waits until n operations succeeded, for at most d, and returns
// how long it waited.
func (t *tally) awaitOK(ctx context.Context, n int, d time.Duration) time.Duration {
	start := time.Now()
	for end := start.Add(d); time.Now().Before(end); {
		if _, ok := t.counts(); ok >= n || sleep(ctx, 100*time.Millisecond) != nil {
			break
		}
	}
	return time.Since(start)
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

// directory is what awaitReplicated reads a cluster's layout from: a
// *client.Client, or a test's fake.
type directory interface {
	Ranges(ctx context.Context) (*tidekvpb.RangesResponse, error)
	Status(ctx context.Context) (*tidekvpb.StatusResponse, error)
}

// awaitReplicated polls the directory until every range has 3 voters and a
// leaseholder (and, if strict, nothing else: no learner, no joint state),
// for at most d; it returns how long after since that was (the chaos run
// passes the moment its last fault was lifted, so the figure includes
// the recovery the target waited for before returning).
func awaitReplicated(ctx context.Context, cl directory, since time.Time, d time.Duration, strict bool) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last error
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cl.Ranges(rctx)
		var st *tidekvpb.StatusResponse
		if err == nil {
			st, err = cl.Status(rctx)
		}
		rcancel()
		if err == nil {
			last = replicatedErr(resp, liveNodes(st), strict)
		} else {
			last = err
		}
		if last == nil {
			return time.Since(since), nil
		}
		if sleep(ctx, 200*time.Millisecond) != nil {
			return time.Since(since), last
		}
	}
}

// liveNodes is the set of nodes st reports live.
func liveNodes(st *tidekvpb.StatusResponse) map[uint64]bool {
	live := map[uint64]bool{}
	for _, n := range st.GetNodes() {
		if n.GetLive() {
			live[n.GetNode().GetNodeId()] = true
		}
	}
	return live
}

// replicatedErr says why resp's ranges are not fully replicated on live
// nodes: a voter on a node that is not live (a replaced node's old ID) does
// not count.
func replicatedErr(resp *tidekvpb.RangesResponse, live map[uint64]bool, strict bool) error {
	if len(resp.GetRanges()) == 0 {
		return errors.New("no ranges reported")
	}
	for _, r := range resp.GetRanges() {
		d := r.GetDesc()
		voters := 0
		for _, rd := range d.GetReplicas() {
			switch {
			case !live[rd.GetNodeId()]:
				return fmt.Errorf("range %d has a replica on node %d, which is not live", d.GetRangeId(), rd.GetNodeId())
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

// laggingClock is the system clock, this far behind.
type laggingClock time.Duration

func (l laggingClock) Now() time.Time { return time.Now().Add(-time.Duration(l)) }
