package scenario

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/bench"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/placement"
)

// scaleout reproduces ElasCass's scale-out experiment (Li and Venugopal,
// "Efficient node bootstrapping for decentralised shared-nothing key-value
// stores", Middleware 2013): a store that starts on one node is loaded with
// data, then grows one node at a time under a read-heavy hotspot load, and
// each new node is measured as it bootstraps (two phases: take a share of
// replicas and leases from the busiest nodes so as to serve at once, then
// keep pulling until balanced).
//
// It runs real `tidekv server` processes with the default replication
// factor, 3: with one or two nodes the ranges have fewer voters than that,
// so the second and third nodes first complete the replication (each
// receives a copy of every range, as a Cassandra ring with RF 3 growing
// from one node does), and from the fourth node on a join is a pure
// rebalance.
func init() {
	register(Scenario{
		Name:  "scaleout",
		Short: "ElasCass scale-out: 1 node, load data, add nodes one at a time under a read-heavy hotspot load; bootstrap time, volume moved, imbalance",
		Run:   runScaleout,
	})
}

type scaleoutParams struct {
	nodes      int
	records    int64
	maxBytes   uint64 // Θmax
	stepLimit  time.Duration
	settle     time.Duration // no replica or lease count change for this long: balanced
	splitLimit time.Duration
	warmup     time.Duration
	threads    int
}

func scaleoutDefaults(opts Options) scaleoutParams {
	// Balanced means placement is at rest, which a pause shorter than its
	// cool-downs does not show: a range that just got its new replica
	// takes no part in balance for RangeCooldown (30 s), so right after
	// the replicas of a join stop moving no lease can move either, and
	// with a shorter settle the step ended there (a new third node
	// "balanced" with 5 of 32 leases, I(load) 0.30–0.37; a pair at 0.811).
	settle := placement.DefaultConfig().RangeCooldown + 5*time.Second
	p := scaleoutParams{nodes: 5, records: 1_100_000, maxBytes: 64 << 20, stepLimit: 10 * time.Minute,
		settle: settle, splitLimit: 3 * time.Minute, warmup: 10 * time.Second, threads: 16}
	if opts.Quick {
		p = scaleoutParams{nodes: 3, records: 50_000, maxBytes: 4 << 20, stepLimit: 2 * time.Minute,
			settle: settle, splitLimit: 12 * time.Second, warmup: 2 * time.Second, threads: 8}
	}
	if opts.Duration > 0 {
		p.stepLimit = opts.Duration
	}
	return p
}

// scaleoutStep is what one join measured. Durations are from the join
// (the new process's start); -1 means "did not happen".
type scaleoutStep struct {
	nodes        int // node count after the join
	nodeID       uint64
	ready        time.Duration // process printed its ready line and answered /health
	firstReplica time.Duration
	firstLease   time.Duration // serving: it holds a lease
	phase1       bool          // "bootstrap phase 1" was seen
	phase1End    time.Duration
	live         time.Duration // the new node's state last turned "live" (a joining node may flash live before its bootstrap)
	balanced     time.Duration // state live, replication complete, replica and lease counts stable
	settled      bool
	recvPhase1   float64 // bytes the new node received until phase 1 ended
	recvTotal    float64 // ... during the whole step
	moved        float64 // bytes all nodes sent during the step
	ranges       int
	imbData      float64
	imbLoad      float64
	imbReplicas  float64
	thrMean      float64
	thrMin       float64
	zeroSecs     int // seconds without a successful operation
	failed       int64
	state        string   // the new node's state at the last poll
	states       []string // the new node's states as seen, in order
	events       map[string]int
	failures     []string // reasons of failed operators
	samples      []scaleoutSample
}

func runScaleout(ctx context.Context, opts Options, out io.Writer) error {
	p := scaleoutDefaults(opts)
	log := opts.Progress
	dir, bin, seed, cleanup, err := plSetup(ctx, opts, "scaleout")
	if err != nil {
		return err
	}
	defer cleanup()

	start, load0 := time.Now(), plLoadAvg()
	pc, err := plStartProcs(ctx, bin, dir, p.nodes, opts.NodeCPUs, nil, log)
	if err != nil {
		return err
	}
	defer pc.close()
	cl := pc.cl
	// Size splits only, as ElasCass partitions by size: the load phase's
	// write rate would otherwise also split ranges by load.
	settings := map[string]string{"range-max-bytes": strconv.FormatUint(p.maxBytes, 10),
		"range-min-bytes": strconv.FormatUint(p.maxBytes/4, 10), "split-qps": "1e9", "load-split-slack": "0"}
	if err := plSettings(ctx, cl, settings); err != nil {
		return fmt.Errorf("settings: %w", err)
	}

	plLogf(log, "loading %d records (%.0f MiB) into 1 node, Θmax %s", p.records, float64(p.records*plRecordBytes)/(1<<20), plMiB(float64(p.maxBytes)))
	loadRes, err := plLoad(ctx, cl, p.records, seed)
	if err != nil {
		return err
	}
	plLogf(log, "loaded in %.1f s (%.0f inserts/s)", loadRes.ElapsedSeconds, loadRes.Throughput)

	ranges, splitTime := scaleoutWaitSplits(ctx, cl, p)
	plLogf(log, "%d ranges after splitting (%.1f s)", ranges, splitTime.Seconds())

	// The read-heavy hotspot load runs from here to the end.
	bcfg := plRecords(p.records, seed+1)
	bcfg.Threads = p.threads
	bcfg.Distribution = bench.Hotspot
	bg := plStartBackground(ctx, cl, bcfg, client.Linearizable())
	defer bg.stop()
	warmFrom, okFrom, failFrom := time.Now(), bg.store.ok.Load(), bg.store.fail.Load()
	plSleep(ctx, p.warmup)
	baseMean, baseMin, _, _ := bg.window(warmFrom, time.Now(), okFrom, failFrom)
	plLogf(log, "1 node: %.0f ops/s", baseMean)

	var steps []scaleoutStep
	for n := 2; n <= p.nodes && ctx.Err() == nil; n++ {
		st, err := scaleoutJoin(ctx, pc, bg, n, p)
		if err != nil {
			return err
		}
		steps = append(steps, st)
	}
	res := scaleoutResult{start: start, load0: load0, load: loadRes, ranges: ranges, splitTime: splitTime,
		baseMean: baseMean, baseMin: baseMin, steps: steps, background: bg.stop()}
	res.final, _ = plStatus(ctx, cl)
	if err := scaleoutReport(out, opts, p, res); err != nil {
		return err
	}
	return ctx.Err()
}

// scaleoutWaitSplits lets size splits catch up after the load: every range
// at most Θmax and the count unchanged for 8 s (a few report intervals).
// It returns the range count and how long that took.
func scaleoutWaitSplits(ctx context.Context, cl *client.Client, p scaleoutParams) (int, time.Duration) {
	splitStart := time.Now()
	var lastCount, ranges int
	var lastChange time.Time
	plWait(ctx, p.splitLimit, time.Second, func() bool {
		resp, err := plRanges(ctx, cl)
		if err != nil {
			return false
		}
		ranges = len(resp.GetRanges())
		over := 0
		for _, ri := range resp.GetRanges() {
			if ri.GetBytes() > p.maxBytes {
				over++
			}
		}
		if ranges != lastCount {
			lastCount, lastChange = ranges, time.Now()
		}
		return over == 0 && time.Since(lastChange) >= 8*time.Second
	})
	return ranges, lastChange.Sub(splitStart)
}

// scaleoutResult is what a run measured, for its report.
type scaleoutResult struct {
	start             time.Time
	load0             string
	load              *bench.PhaseResult
	ranges            int
	splitTime         time.Duration
	baseMean, baseMin float64
	steps             []scaleoutStep
	background        *bench.Result
	final             *tidekvpb.StatusResponse
}

// scaleoutReport writes the run's tables, figures and verdicts.
func scaleoutReport(out io.Writer, opts Options, p scaleoutParams, r scaleoutResult) error {
	fmt.Fprintf(out, "## scaleout\n\n")
	fmt.Fprintf(out, "Machine load average (1 min) at start / end: %s / %s.\n\n", r.load0, plLoadAvg())
	fmt.Fprintf(out, "%d records of 1,010-byte values (%.0f MiB), Θmax %s MiB, Θmin %s MiB (size splits only), replication factor 3; "+
		"background YCSB B (95%% read, 5%% update), hotspot 20%%/80%%, %d threads, linearizable reads. Quick: %v. Total %.0f s.\n\n",
		p.records, float64(p.records*plRecordBytes)/(1<<20), plMiB(float64(p.maxBytes)), plMiB(float64(p.maxBytes/4)), p.threads, opts.Quick, time.Since(r.start).Seconds())
	fmt.Fprintf(out, "Load into 1 node: %.1f s (%.0f inserts/s); %d ranges after splitting (settled %.1f s after the load). 1-node throughput: %.0f ops/s (lowest second %.0f).\n\n",
		r.load.ElapsedSeconds, r.load.Throughput, r.ranges, r.splitTime.Seconds(), r.baseMean, r.baseMin)
	rows := [][]string{}
	for _, s := range r.steps {
		bal := plSecs(s.balanced)
		if !s.settled {
			bal = "> " + plSecs(s.balanced) + " (not settled)"
		}
		p1 := plSecs(s.phase1End)
		if !s.phase1 {
			p1 = "not seen"
		}
		rows = append(rows, []string{fmt.Sprintf("%d→%d (node id %d)", s.nodes-1, s.nodes, s.nodeID), strconv.Itoa(s.ranges),
			plSecs(s.ready), plSecs(s.firstReplica), plSecs(s.firstLease), p1, bal,
			plMiB(s.recvPhase1), plMiB(s.recvTotal), plMiB(s.moved),
			fmt.Sprintf("%.3f", s.imbData), fmt.Sprintf("%.3f", s.imbLoad), fmt.Sprintf("%.3f", s.imbReplicas),
			fmt.Sprintf("%.0f / %.0f", s.thrMean, s.thrMin), strconv.Itoa(s.zeroSecs), strconv.FormatInt(s.failed, 10)})
	}
	fmt.Fprintf(out, "Times in seconds from the new process's start; balanced = the new node live, every range fully replicated, and no node's replica or lease count changed for %v since; "+
		"volumes in MiB of snapshot SSTs (tidekv_snapshot_{received,sent}_bytes_total).\n", p.settle)
	fmt.Fprintln(out)
	plTable(out, []string{"step", "ranges", "ready", "first replica", "first lease (serving)", "phase 1 ends", "balanced",
		"bootstrap MiB (phase 1)", "received MiB", "moved MiB (all nodes)", "I(data)", "I(load)", "I(replicas)", "ops/s mean / lowest 1 s", "seconds at 0 ops/s", "failed ops"}, rows)

	rows = rows[:0]
	for _, s := range r.steps {
		rows = append(rows, []string{fmt.Sprintf("%d→%d", s.nodes-1, s.nodes), strings.Join(s.states, " → "), scaleoutEvents(s.events)})
	}
	fmt.Fprintln(out, "The new node's states as `ctl status` showed them, and the placement operations during each step (events by kind/policy):")
	fmt.Fprintln(out)
	plTable(out, []string{"step", "states", "events"}, rows)

	if r.final != nil {
		rows = rows[:0]
		for _, ns := range r.final.GetNodes() {
			rows = append(rows, []string{strconv.FormatUint(ns.GetNode().GetNodeId(), 10), ns.GetState(), strconv.Itoa(int(ns.GetReplicas())),
				strconv.Itoa(int(ns.GetLeases())), plMiB(float64(ns.GetBytes())), fmt.Sprintf("%.0f", ns.GetQps())})
		}
		fmt.Fprintln(out, "Nodes at the end:")
		fmt.Fprintln(out)
		plTable(out, []string{"node", "state", "replicas", "leases", "data MiB", "qps"}, rows)
	}
	nf := 0
	for _, s := range r.steps {
		for _, f := range s.failures {
			fmt.Fprintf(out, "- %d→%d failed operator: %s\n", s.nodes-1, s.nodes, f)
			nf++
		}
	}
	if nf > 0 {
		fmt.Fprintln(out)
	}
	if bres := r.background; bres != nil && bres.Run != nil {
		fmt.Fprintf(out, "Background load over all steps: %d operations, %d errors, %.0f ops/s.\n\n", bres.Run.Operations, bres.Run.Errors, bres.Run.Throughput)
	}
	for _, s := range r.steps {
		if err := writeFigure(opts, out, "scaleout", fmt.Sprintf("join%d", s.nodes), scaleoutChart(s)); err != nil {
			return err
		}
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	for _, s := range r.steps {
		fmt.Fprintf(out, "- %d→%d: serving within 30 s %s (%s s); I(data) ≤ 0.1 %s (%.3f); I(load) ≤ 0.2 %s (%.3f)\n",
			s.nodes-1, s.nodes, met(s.firstLease >= 0 && s.firstLease <= 30*time.Second), plSecs(s.firstLease),
			met(s.imbData <= 0.1), s.imbData, met(s.imbLoad <= 0.2), s.imbLoad)
	}
	fmt.Fprintln(out)
	return nil
}

// scaleoutCounts counts each node's replicas (adaptive learners left out)
// and leases over ranges, says whether every range has want voters and no
// learner, and names the counts ("n1:32/17 n2:32/15 ") so that a change in
// any of them shows. Leases count as well as replicas: once every range
// is on every node of a pair or a trio, spreading load is moving leases,
// which goes on after the replica counts stop (and waits out the
// cool-down of each range that just got a replica).
func scaleoutCounts(ranges []*tidekvpb.RangeInfo, want int) (replicas, leases map[uint64]int, complete bool, counts string) {
	replicas, leases, complete = map[uint64]int{}, map[uint64]int{}, true
	for _, ri := range ranges {
		voters := 0
		for _, rd := range ri.GetDesc().GetReplicas() {
			if rd.GetAdaptive() {
				continue
			}
			replicas[rd.GetNodeId()]++
			if rd.GetType() == tidekvpb.ReplicaType_VOTER {
				voters++
			} else {
				complete = false // a learner half way to becoming a voter
			}
		}
		complete = complete && voters == want
		leases[ri.GetLeaderNodeId()]++
	}
	ids := make([]uint64, 0, len(replicas))
	for id := range replicas {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "n%d:%d/%d ", id, replicas[id], leases[id])
	}
	return replicas, leases, complete, b.String()
}

// noteStatus folds one status poll, at since the step's start, into the
// step: every node's load sample, and the new node's state when it
// changed (logged).
func (st *scaleoutStep) noteStatus(status *tidekvpb.StatusResponse, at time.Duration, log io.Writer) {
	smp := scaleoutSample{at: at.Seconds(), qps: map[uint64]float64{}, replicas: map[uint64]float64{}, leases: map[uint64]float64{}}
	for _, ns := range status.GetNodes() {
		id := ns.GetNode().GetNodeId()
		smp.qps[id], smp.replicas[id], smp.leases[id] = ns.GetQps(), float64(ns.GetReplicas()), float64(ns.GetLeases())
		if id != st.nodeID || ns.GetState() == st.state {
			continue
		}
		st.state = ns.GetState()
		plLogf(log, "node %d: %s (%.1f s)", st.nodes, st.state, at.Seconds())
		if st.state == "live" {
			st.live = at
		}
		st.states = append(st.states, fmt.Sprintf("%s at %.1f s", st.state, at.Seconds()))
	}
	st.samples = append(st.samples, smp)
	if st.state == "bootstrap phase 1" {
		st.phase1 = true
	}
}

// scaleoutJoin starts node n and follows it until balanced.
func scaleoutJoin(ctx context.Context, pc *plProcs, bg *plBackground, n int, p scaleoutParams) (scaleoutStep, error) {
	st := scaleoutStep{nodes: n, firstReplica: -1, firstLease: -1, phase1End: -1, live: -1, balanced: -1}
	sent0, recv0 := pc.snapshotBytes(ctx)
	okFrom, failFrom := bg.store.ok.Load(), bg.store.fail.Load()
	t0 := time.Now()
	proc, err := pc.startNode(ctx, n)
	if err != nil {
		return st, err
	}
	st.ready = time.Since(t0)
	st.nodeID = proc.NodeID()
	st.followUntilBalanced(ctx, pc, n, p, t0, recv0[n])
	end := time.Now()
	st.thrMean, st.thrMin, st.zeroSecs, st.failed = bg.window(t0, end, okFrom, failFrom)
	sent1, recv1 := pc.snapshotBytes(ctx)
	for i, v := range sent1 {
		st.moved += v - sent0[i]
	}
	st.recvTotal = recv1[n] - recv0[n]
	if !st.phase1 || st.phase1End < 0 {
		st.recvPhase1 = math.NaN()
	}
	st.sampleImbalance(ctx, pc.cl)
	st.events, st.failures = plEventCounts(ctx, pc.cl, t0, time.Now())
	plLogf(pc.progress, "step %d→%d: I(data) %.3f I(load) %.3f I(replicas) %.3f, moved %s MiB, %.0f ops/s",
		n-1, n, st.imbData, st.imbLoad, st.imbReplicas, plMiB(st.moved), st.thrMean)
	return st, nil
}

// followUntilBalanced polls the cluster from node n's start (t0) until it
// is live, every range is complete and the replica and lease counts have
// held still for p.settle, or p.stepLimit passes. recv0 is the node's
// received snapshot bytes at t0.
func (st *scaleoutStep) followUntilBalanced(ctx context.Context, pc *plProcs, n int, p scaleoutParams, t0 time.Time, recv0 float64) {
	log := pc.progress
	since := func() time.Duration { return time.Since(t0) }
	var sig string
	lastChange := time.Now()
	done := plWait(ctx, p.stepLimit, 500*time.Millisecond, func() bool {
		status, err := plStatus(ctx, pc.cl)
		if err != nil {
			return false
		}
		resp, err := plRanges(ctx, pc.cl)
		if err != nil {
			return false
		}
		st.noteStatus(status, since(), log)
		if st.phase1 && st.phase1End < 0 && st.state != "bootstrap phase 1" {
			st.phase1End = since()
			if m, err := plScrape(ctx, pc.httpAddr(n), plRecvBytes); err == nil {
				st.recvPhase1 = m[plRecvBytes] - recv0
			}
		}
		replicas, leases, complete, counts := scaleoutCounts(resp.GetRanges(), min(3, n))
		if st.firstReplica < 0 && replicas[st.nodeID] > 0 {
			st.firstReplica = since()
			plLogf(log, "node %d: first replica (%.1f s)", n, st.firstReplica.Seconds())
		}
		if st.firstLease < 0 && leases[st.nodeID] > 0 {
			st.firstLease = since()
			plLogf(log, "node %d: first lease (%.1f s)", n, st.firstLease.Seconds())
		}
		if counts != sig {
			sig, lastChange = counts, time.Now()
		}
		st.ranges = len(resp.GetRanges())
		return st.state == "live" && complete && st.firstReplica >= 0 && time.Since(lastChange) >= p.settle
	})
	st.settled = done
	st.balanced = lastChange.Sub(t0)
	if !done {
		st.balanced = since()
		plLogf(log, "node %d: not balanced within %v (replicas/leases %s, state %q)", n, p.stepLimit, sig, st.state)
	} else {
		plLogf(log, "node %d: balanced at %.1f s (replicas/leases %s)", n, st.balanced.Seconds(), sig)
	}
}

// sampleImbalance takes the imbalance once balanced: the mean of a few
// status samples (the per-node request rates are noisy).
func (st *scaleoutStep) sampleImbalance(ctx context.Context, cl *client.Client) {
	var data, load, reps []float64
	plWait(ctx, 6*time.Second, time.Second, func() bool {
		if s, err := plStatus(ctx, cl); err == nil && s.GetImbalance() != nil {
			data = append(data, s.GetImbalance().GetBytes())
			load = append(load, s.GetImbalance().GetQps())
			reps = append(reps, s.GetImbalance().GetReplicas())
		}
		return len(data) >= 5
	})
	st.imbData, _ = plMeanStd(data)
	st.imbLoad, _ = plMeanStd(load)
	st.imbReplicas, _ = plMeanStd(reps)
}

// scaleoutEvents formats event counts, the interesting kinds first.
func scaleoutEvents(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if strings.Contains(k, "/") || strings.HasPrefix(k, "replica-") || strings.HasPrefix(k, "node-") ||
			k == "lease-transfer" || k == "split" || k == "merge" || strings.Contains(k, "failed") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
