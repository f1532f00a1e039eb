package elastic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/actuator/local"
	"github.com/tidekv/tidekv/internal/control"
	policy "github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/launcher"
	"github.com/tidekv/tidekv/sim"
)

// Options describe one real-process run.
type Options struct {
	Binary     string // the tidekv executable
	Dir        string // the cluster's data directory (created)
	Scenario   string // step, spike or diurnal
	Controller string // static, reactive, proactive or combined
	// Nodes start the cluster; MaxNodes bounds autoscaling, and
	// static-at-peak runs that many from the start.
	Nodes, MaxNodes int
	// NodeCPUs, when positive, sizes every node, those the autoscaler
	// starts included (launcher.NodeSpec.CPUs).
	NodeCPUs float64
	// Hog, when positive, is the share of node 1's quota a co-located
	// busy process takes (launcher.Config.Hog); it needs NodeCPUs.
	Hog float64
	// IgnoreInterference runs the plain planner
	// (autoscale.ignore-interference).
	IgnoreInterference bool
	// Rate is what Nodes nodes sustain (Calibrate's answer); the curves
	// are multiples of it, and the planner's prior per node is Rate/Nodes.
	Rate float64
	// Period is the diurnal curve's period, also the forecaster's season.
	Period time.Duration
	// SLO is the p99 the controllers keep and calibration judges by.
	SLO time.Duration
	// Workers bound the requests in flight: beyond them the generator
	// refuses (counted as refused), so the load stays open-loop.
	Workers int
	Seed    uint64
}

// DefaultOptions: 3 nodes up to 5, curves around 2,000 requests/s (what
// 3 unsized nodes sustained on this 2-core machine), a diurnal period of
// 5 minutes, 128 workers.
func DefaultOptions() Options {
	return Options{Scenario: "step", Controller: "combined", Nodes: 3, MaxNodes: 5, Rate: 2000,
		Period: 5 * time.Minute, SLO: policy.DefaultPolicy().SLOP99, Workers: 128, Seed: 1}
}

// curve is a scenario's load, in multiples of rate, the rate the starting
// nodes sustain: every curve peaks at 1.4× it, which the starting nodes
// cannot serve and MaxNodes (calibrated to sustain ≥ 1.5× it) can. The
// diurnal curve runs two periods, so the forecaster has seen a whole
// season before the second.
func curve(name string, rate float64, period time.Duration, seed uint64) (sim.LoadCurve, time.Duration, error) {
	switch name {
	case "step":
		return sim.StepCurve(0.75*rate, time.Minute, 1.4/0.75), 3 * time.Minute, nil
	case "spike":
		return sim.SpikeCurve(0.4*rate, time.Minute, 1.4/0.4, time.Minute), 3 * time.Minute, nil
	case "diurnal":
		return sim.DiurnalCurve(0.9*rate, 0.5*rate, period, 0.05, seed), 2 * period, nil
	}
	return nil, 0, fmt.Errorf("bench elastic: real-process runs know step, spike and diurnal, not %q", name)
}

// Result is a run's timeline and summary.
type Result struct {
	Timeline  []sim.ElasticPoint
	Metrics   sim.ElasticMetrics
	Decisions []control.StatusDecision
	SLO       time.Duration
}

// Run starts the cluster, applies the load and returns the timeline;
// progress lines go to progress. The cluster and every node the
// autoscaler started are stopped before it returns.
func Run(ctx context.Context, o Options, progress io.Writer) (Result, error) {
	load, duration, err := curve(o.Scenario, o.Rate, o.Period, o.Seed)
	if err != nil {
		return Result{}, err
	}
	nodes := o.Nodes
	if o.Controller == policy.Static {
		// Static-at-peak, as in the simulator: the curves peak where
		// only MaxNodes keep the SLO.
		nodes = o.MaxNodes
	}
	cl, stop, err := startCluster(ctx, o, nodes, launcher.AutoscaleArgs(o.MaxNodes, o.NodeCPUs), progress)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	settings := map[string]string{"autoscale.controller": o.Controller, "autoscale.horizon": "10s",
		"autoscale.scale-in-after": "30s", "autoscale.cool-down": "30s", "autoscale.slo-p99": o.SLO.String(),
		"autoscale.node-capacity":       fmt.Sprint(math.Round(o.Rate / float64(o.Nodes))),
		"autoscale.ignore-interference": strconv.FormatBool(o.IgnoreInterference)}
	if o.Scenario == "diurnal" {
		settings["autoscale.season"] = o.Period.String()
	}
	set := func(settings map[string]string) error {
		return Retry(ctx, func(ctx context.Context) error { _, err := cl.Settings(ctx, settings); return err })
	}
	// The curve's first rate, unrecorded and with the static controller,
	// until the client's range cache and the nodes' connections are warm:
	// without it the first seconds' p99 spiked past the SLO at a third of
	// the starting nodes' capacity and every autoscaling controller
	// scaled out at once.
	g := newGenerator(cl, o.Workers, o.Seed)
	if err := set(map[string]string{"autoscale.controller": policy.Static}); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(progress, "warming up at %.0f requests/s for %v\n", load(0), warmup)
	offer(ctx, g, func(time.Duration) float64 { return load(0) }, warmup, nil)
	g.wait()
	g.take()
	if err := set(settings); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(progress, "cluster of %d nodes up in %s; %s load around %.0f requests/s for %v under the %s controller\n",
		nodes, o.Dir, o.Scenario, o.Rate, duration, o.Controller)
	var res Result
	res.Timeline = drive(ctx, cl, g, load, duration, progress)
	st, err := status(ctx, cl)
	if err != nil {
		return res, err
	}
	res.SLO = time.Duration(st.Policy.SLOP99Ms * float64(time.Millisecond))
	// Scaling decisions from the cluster's event log: the status holds
	// only what the current meta leaseholder decided.
	events, err := cl.Events(ctx, 0)
	if err != nil {
		return res, err
	}
	actions := 0
	for _, e := range events {
		switch e.GetKind() {
		case "scale-out", "scale-in":
			actions++
			fallthrough
		case "scale-out-done", "scale-in-done", "scale-out-failed", "scale-in-failed", "scale-in-cancelled":
			res.Decisions = append(res.Decisions, control.StatusDecision{At: time.Unix(0, e.GetUnixNanos()), Action: e.GetKind(), Reason: e.GetReason()})
		}
	}
	res.Metrics = sim.Metrics(res.Timeline, res.SLO, time.Second, actions)
	return res, nil
}

// warmup is how long Run offers the curve's first rate before the run.
const warmup = 30 * time.Second

// startCluster starts nodes sized nodes in o.Dir with extra arguments,
// spreads the workload's ranges over them and returns a client of node 1
// and what stops the cluster and every node its autoscaler started.
func startCluster(ctx context.Context, o Options, nodes int, extra []string, progress io.Writer) (*client.Client, func(), error) {
	cl, stop, err := StartCluster(ctx, o.Binary, o.Dir, nodes, o.NodeCPUs, o.Hog, extra, progress)
	if err != nil {
		return nil, nil, err
	}
	if err := spread(ctx, cl, nodes, progress); err != nil {
		stop()
		return nil, nil, err
	}
	return cl, stop, nil
}

// StartCluster starts nodes nodes of binary in dir on loopback, each
// sized to nodeCPUs (0: unsized), node 1 sharing hog of its quota with a
// co-runner (0: none; launcher.Config.Hog), with extra server arguments
// (launcher.AutoscaleArgs for a cluster that grows itself), and returns
// a client of node 1 and what stops the cluster and every node its
// autoscaler started. Other real-process benchmarks (bench/cachebench)
// start their clusters with it.
func StartCluster(ctx context.Context, binary, dir string, nodes int, nodeCPUs, hog float64, extra []string, progress io.Writer) (*client.Client, func(), error) {
	base, err := launcher.FreeBasePort("127.0.0.1", nodes)
	if err != nil {
		return nil, nil, err
	}
	cfg := launcher.Config{Nodes: nodes, DataDir: dir, Host: "127.0.0.1", BasePort: base, Binary: binary,
		ExtraArgs: extra, NodeCPUs: nodeCPUs, Hog: hog, ReadyTimeout: time.Minute, StopTimeout: 10 * time.Second}
	cluster, err := launcher.NewCluster(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := cluster.Start(ctx, nil); err != nil {
		stopAll(cluster, cfg, progress)
		return nil, nil, err
	}
	ccfg := client.DefaultConfig()
	ccfg.Addrs = []string{cfg.Node(1).GRPCAddr}
	cl, err := client.New(ccfg)
	if err != nil {
		stopAll(cluster, cfg, progress)
		return nil, nil, err
	}
	return cl, func() { cl.Close(); stopAll(cluster, cfg, progress) }, nil
}

// ranges is how many ranges the workload's keys are split into before the
// load starts. Unsplit, they are one range whose leaseholder serves every
// request, so adding nodes adds no capacity until a load split, and the
// placement's load-split thresholds (requests/s) are above what a small
// sized node serves at all.
const ranges = 16

// spread splits the workload's keys into ranges and waits, up to a
// minute, until no node holds more than two leases or two replicas more
// than another, so that every run starts from the same layout.
func spread(ctx context.Context, cl *client.Client, nodes int, progress io.Writer) error {
	for i := 1; i < ranges; i++ {
		key := fmt.Appendf(nil, "elastic/%05d", i*keys/ranges)
		if err := Retry(ctx, func(ctx context.Context) error { _, err := cl.Split(ctx, key); return err }); err != nil {
			return fmt.Errorf("bench elastic: splitting at %s: %w", key, err)
		}
	}
	fmt.Fprintf(progress, "%d nodes up, the workload split into %d ranges; waiting for their leases and replicas to spread\n", nodes, ranges)
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := cl.Status(ctx)
		leases, replicas := []uint32{}, []uint32{}
		if err == nil {
			for _, n := range st.GetNodes() {
				if n.GetLive() {
					leases, replicas = append(leases, n.GetLeases()), append(replicas, n.GetReplicas())
				}
			}
		}
		balanced := len(leases) == nodes && slices.Max(leases) <= slices.Min(leases)+2 && slices.Max(replicas) <= slices.Min(replicas)+2
		if balanced || time.Now().After(deadline) {
			fmt.Fprintf(progress, "%d ranges; leases by node %v, replicas %v (balanced: %v)\n", ranges, leases, replicas, balanced)
			return ctx.Err()
		}
		// An interrupt stops the wait at once; it used to run out the
		// minute first, with every status call failing.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Trial is one constant rate offered to a fixed cluster.
type Trial struct {
	Nodes          int
	Rate           float64 // offered, requests/s
	Served, Failed int     // in the measured window
	P99            time.Duration
	Sustained      bool
	// CPU is each live node's utilisation of its quota (of the machine
	// when unsized) as it reported it at the end of the window;
	// GeneratorCPU the CPUs this process (the load generator, outside the
	// nodes' cgroups) used in the window.
	CPU          []float64
	GeneratorCPU float64
}

// Calibration is what fixed clusters of o.Nodes and o.MaxNodes nodes
// sustain: the highest offered rate whose served p99 is within the SLO
// with at most 1% of requests failed or refused.
type Calibration struct {
	SLO    time.Duration
	Rates  map[int]float64 // by node count
	Trials []Trial
}

// Calibration trials: each rate is offered for trialWarmup, then measured
// for trialWindow; the rates climb by calRise until one is not
// sustained, and the rate calRefine above the last sustained one is tried
// once more, so the answer is within 10%.
const (
	trialWarmup = 5 * time.Second
	trialWindow = 10 * time.Second
	calRise     = 1.2
	calRefine   = 1.1
	calMaxTries = 20
)

// Calibrate measures, without autoscaling, the rate o.Nodes nodes sustain
// starting from o.Rate/2, then MaxNodes from the first's answer.
func Calibrate(ctx context.Context, o Options, progress io.Writer) (Calibration, error) {
	c := Calibration{SLO: o.SLO, Rates: map[int]float64{}}
	from := o.Rate / 2
	for i, nodes := range []int{o.Nodes, o.MaxNodes} {
		co := o
		co.Dir = filepath.Join(o.Dir, fmt.Sprintf("calibrate-%d", nodes))
		cl, stop, err := startCluster(ctx, co, nodes, nil, progress)
		if err != nil {
			return c, err
		}
		rate, trials, err := sustainable(ctx, cl, newGenerator(cl, o.Workers, o.Seed+uint64(i)), nodes, from, c.SLO, progress)
		stop()
		c.Trials = append(c.Trials, trials...)
		if err != nil {
			return c, err
		}
		c.Rates[nodes] = rate
		from = max(from, rate)
	}
	return c, nil
}

// sustainable runs trials on the cluster, as search chooses their rates,
// and returns the highest sustained rate.
func sustainable(ctx context.Context, cl *client.Client, g *generator, nodes int, rate float64, slo time.Duration, progress io.Writer) (float64, []Trial, error) {
	var trials []Trial
	best := search(rate, func(rate float64) bool {
		t := trial(ctx, g, rate, slo)
		t.Nodes = nodes
		if st, err := cl.Status(ctx); err == nil {
			for _, n := range st.GetNodes() {
				if n.GetLive() {
					t.CPU = append(t.CPU, math.Round(100*n.GetCpu())/100)
				}
			}
		}
		trials = append(trials, t)
		fmt.Fprintf(progress, "%d nodes at %5.0f/s: served %d, failed %d, p99 %v, node CPU %v, generator %.2f CPU: sustained %v\n",
			nodes, t.Rate, t.Served, t.Failed, t.P99.Round(100*time.Microsecond), t.CPU, t.GeneratorCPU, t.Sustained)
		return t.Sustained && ctx.Err() == nil
	})
	return best, trials, ctx.Err()
}

// search finds the highest rate sustained judges true, starting from
// rate: up by calRise while trials pass, down by it while none has, then
// once calRefine above the highest passed rate if that is below the
// lowest failed one, so the answer is within calRefine. It returns 0 when
// no trial passed within calMaxTries.
func search(rate float64, sustained func(rate float64) bool) float64 {
	best, ceiling := 0.0, math.Inf(1)
	refined := false
	for range calMaxTries {
		if sustained(rate) {
			best = rate
		} else {
			ceiling = rate
		}
		switch {
		case best == 0:
			rate /= calRise
		case rate*calRise < ceiling:
			rate *= calRise
		case !refined && best*calRefine < ceiling:
			refined, rate = true, best*calRefine
		default:
			return best
		}
	}
	return best
}

// trial offers rate open-loop for trialWarmup+trialWindow and judges the
// window.
func trial(ctx context.Context, g *generator, rate float64, slo time.Duration) Trial {
	constant := func(time.Duration) float64 { return rate }
	offer(ctx, g, constant, trialWarmup, nil)
	g.take()
	cpu0, t0 := selfCPU(), time.Now()
	offer(ctx, g, constant, trialWindow, nil)
	g.wait()
	lat, failed := g.take()
	t := Trial{Rate: rate, Served: len(lat), Failed: failed,
		GeneratorCPU: math.Round(100*(selfCPU()-cpu0).Seconds()/time.Since(t0).Seconds()) / 100}
	if len(lat) > 0 {
		slices.Sort(lat)
		t.P99 = lat[(len(lat)*99)/100]
	}
	t.Sustained = len(lat) > 0 && t.P99 <= slo && float64(failed) <= 0.01*float64(len(lat)+failed)
	return t
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// offer offers load for d, open-loop in 10 ms slices, calling each (if
// not nil) once a second with the time since the start.
func offer(ctx context.Context, g *generator, load sim.LoadCurve, d time.Duration, each func(at time.Duration)) {
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	nextSecond := start.Add(time.Second)
	owed := 0.0
	for now := range tick.C {
		if ctx.Err() != nil || now.Sub(start) >= d {
			return
		}
		owed += load(now.Sub(start)) * 0.01
		for ; owed >= 1; owed-- {
			g.offer(ctx)
		}
		if each != nil && now.After(nextSecond) {
			nextSecond = nextSecond.Add(time.Second)
			each(now.Sub(start))
		}
	}
}

// drive offers load for duration and returns one timeline point per
// second.
func drive(ctx context.Context, cl *client.Client, g *generator, load sim.LoadCurve, duration time.Duration, progress io.Writer) []sim.ElasticPoint {
	var timeline []sim.ElasticPoint
	offer(ctx, g, load, duration, func(at time.Duration) {
		p := g.second(ctx, cl, at, load(at))
		if p.Nodes == 0 && len(timeline) > 0 {
			// The status call timed out: the cluster is as it was.
			last := timeline[len(timeline)-1]
			p.Nodes, p.Starting, p.MigrationAllowance, p.Utilization = last.Nodes, last.Starting, last.MigrationAllowance, last.Utilization
		}
		timeline = append(timeline, p)
		if len(timeline)%15 == 0 {
			fmt.Fprintf(progress, "%4.0fs offered %5.0f served %5.0f refused %5.0f p99 %6.1fms nodes %d migration %3.0f MiB/s\n",
				p.At.Seconds(), p.Offered, p.Served, p.Rejected, float64(p.P99.Microseconds())/1000, p.Nodes, p.MigrationAllowance/(1<<20))
			fmt.Fprintf(progress, "      %s\n", placementLine(ctx, cl))
		}
	})
	g.wait()
	return timeline
}

// placementLine is where the leases are and why, by node ID: each live
// node's leases, its CPU (of its quota), its own p99 (ms) and the
// controller's measured capacity at the SLO (requests/s) and
// interference factor. It shows
// lease balance weighing nodes by measured capacity (a hogged node's
// leases go to its peers) or, under the plain planner, not.
func placementLine(ctx context.Context, cl *client.Client) string {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	st, err := cl.Status(ctx)
	if err != nil {
		return fmt.Sprintf("placement: %v", err)
	}
	as, err := status(ctx, cl)
	if err != nil {
		return fmt.Sprintf("placement: %v", err)
	}
	var b strings.Builder
	b.WriteString("node leases/cpu/p99ms/capacity/interference:")
	for _, n := range st.GetNodes() {
		if n.GetLive() {
			id := n.GetNode().GetNodeId()
			fmt.Fprintf(&b, " %d:%d/%.2f/%.0f/%.0f/%.2f", id, n.GetLeases(), n.GetCpu(), n.GetP99Ms(), as.CapacityOpsPerNode[id], as.Interference[id])
		}
	}
	return b.String()
}

// stopAll stops the cluster and the nodes the autoscaler started.
func stopAll(c *launcher.Cluster, cfg launcher.Config, progress io.Writer) {
	if err := c.Stop(); err != nil {
		fmt.Fprintf(progress, "stopping the cluster: %v\n", err)
	}
	lc := local.DefaultConfig()
	lc.Dir, lc.Binary = local.DirBeside(cfg.Node(1).DataDir), cfg.Binary
	act, err := local.New(lc)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = act.StopAll(ctx)
	}
	if err != nil {
		fmt.Fprintf(progress, "stopping autoscaled nodes in %s: %v\n", filepath.Dir(lc.Dir), err)
	}
}

func status(ctx context.Context, cl *client.Client) (control.AutoscaleStatus, error) {
	var st control.AutoscaleStatus
	raw, err := cl.AutoscaleStatus(ctx)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(raw, &st)
}

// Retry runs f until it succeeds, for at most 30 s: admin calls to a
// cluster that has just started (its meta range may still be electing).
func Retry(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := f(ctx)
		if err == nil || ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// generator issues requests open-loop: a request offered when every
// worker is busy is refused at once and counted, never queued.
type generator struct {
	cl   *client.Client
	sem  chan struct{}
	rng  *rand.Rand
	wg   sync.WaitGroup
	mu   sync.Mutex
	lat  []time.Duration // this second's successful requests
	errs int             // this second's failed or refused requests
}

func newGenerator(cl *client.Client, workers int, seed uint64) *generator {
	return &generator{cl: cl, sem: make(chan struct{}, workers), rng: rand.New(rand.NewPCG(seed, seed^0xe1a5))}
}

// Keys and values of the workload: 50% reads, 50% writes of 256 bytes
// over 10,000 keys.
const (
	keys      = 10000
	valueSize = 256
)

func (g *generator) offer(ctx context.Context) {
	select {
	case g.sem <- struct{}{}:
	default:
		g.mu.Lock()
		g.errs++
		g.mu.Unlock()
		return
	}
	key := fmt.Appendf(nil, "elastic/%05d", g.rng.IntN(keys))
	write := g.rng.IntN(2) == 0
	g.wg.Go(func() {
		defer func() { <-g.sem }()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		t0 := time.Now()
		var err error
		if write {
			err = g.cl.Put(rctx, key, make([]byte, valueSize))
		} else {
			if _, err = g.cl.Get(rctx, key); errors.Is(err, client.ErrNotFound) {
				err = nil
			}
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if err != nil {
			g.errs++
			return
		}
		g.lat = append(g.lat, time.Since(t0))
	})
}

// take returns and resets the latencies and failures counted so far.
func (g *generator) take() ([]time.Duration, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	lat, errs := g.lat, g.errs
	g.lat, g.errs = nil, 0
	return lat, errs
}

// second closes this second's counts into a timeline point.
func (g *generator) second(ctx context.Context, cl *client.Client, at time.Duration, offered float64) sim.ElasticPoint {
	lat, errs := g.take()
	p := sim.ElasticPoint{At: at, Offered: offered, Served: float64(len(lat)), Rejected: float64(errs)}
	if len(lat) > 0 {
		slices.Sort(lat)
		p.P99 = lat[(len(lat)*99)/100]
	}
	sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if st, err := status(sctx, cl); err == nil {
		p.Nodes, p.Starting, p.MigrationAllowance = st.Nodes, st.PendingOut, st.MigrationBytesPerSec
		capacity := 0.0
		for _, c := range st.CapacityOpsPerNode {
			capacity += c
		}
		if capacity > 0 {
			p.Utilization = offered / capacity
		}
	}
	return p
}

func (g *generator) wait() { g.wg.Wait() }
