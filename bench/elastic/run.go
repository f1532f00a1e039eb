package elastic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/actuator/local"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/launcher"
	"github.com/tidekv/tidekv/sim"
)

// Options describe one real-process run.
type Options struct {
	Binary     string // the tidekv executable
	Dir        string // the cluster's data directory (created)
	Scenario   string // step or spike
	Controller string // static, reactive, proactive or combined
	// Nodes start the cluster; MaxNodes bounds autoscaling.
	Nodes, MaxNodes int
	// NodeCPUs, when positive, sizes every node, those the autoscaler
	// starts included (launcher.NodeSpec.CPUs).
	NodeCPUs float64
	// Workers bound the requests in flight: beyond them the generator
	// refuses (counted as refused), so the load stays open-loop.
	Workers int
	Seed    uint64
}

// DefaultOptions: 3 nodes up to 5, 128 workers.
func DefaultOptions() Options {
	return Options{Scenario: "step", Controller: "combined", Nodes: 3, MaxNodes: 5, Workers: 128, Seed: 1}
}

// Scenario curves scaled to this machine: a 3-node cluster serves a few
// thousand requests/s on two cores.
func curve(name string) (sim.LoadCurve, time.Duration, error) {
	switch name {
	case "step":
		return sim.StepCurve(1500, time.Minute, 2), 3 * time.Minute, nil
	case "spike":
		return sim.SpikeCurve(800, time.Minute, 4.5, time.Minute), 3 * time.Minute, nil
	}
	return nil, 0, fmt.Errorf("bench elastic: real-process runs know step and spike, not %q", name)
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
	load, duration, err := curve(o.Scenario)
	if err != nil {
		return Result{}, err
	}
	base, err := launcher.FreeBasePort("127.0.0.1", o.Nodes)
	if err != nil {
		return Result{}, err
	}
	cfg := launcher.Config{Nodes: o.Nodes, DataDir: o.Dir, Host: "127.0.0.1", BasePort: base, Binary: o.Binary,
		ExtraArgs: launcher.AutoscaleArgs(o.MaxNodes, o.NodeCPUs), NodeCPUs: o.NodeCPUs,
		ReadyTimeout: time.Minute, StopTimeout: 10 * time.Second}
	cluster, err := launcher.NewCluster(cfg)
	if err != nil {
		return Result{}, err
	}
	defer stopAll(cluster, cfg, progress)
	if err := cluster.Start(ctx, nil); err != nil {
		return Result{}, err
	}
	ccfg := client.DefaultConfig()
	ccfg.Addrs = []string{cfg.Node(1).GRPCAddr}
	cl, err := client.New(ccfg)
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	settings := map[string]string{"autoscale.controller": o.Controller, "autoscale.horizon": "10s",
		"autoscale.scale-in-after": "30s", "autoscale.cool-down": "30s"}
	if err := retry(ctx, func(ctx context.Context) error { _, err := cl.Settings(ctx, settings); return err }); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(progress, "cluster of %d nodes up in %s; %s load for %v under the %s controller\n", o.Nodes, o.Dir, o.Scenario, duration, o.Controller)
	var res Result
	res.Timeline = drive(ctx, cl, newGenerator(cl, o.Workers, o.Seed), load, duration, progress)
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

// drive offers load for duration, open-loop in 10 ms slices, and returns
// one timeline point per second.
func drive(ctx context.Context, cl *client.Client, g *generator, load sim.LoadCurve, duration time.Duration, progress io.Writer) []sim.ElasticPoint {
	var timeline []sim.ElasticPoint
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	nextSecond := start.Add(time.Second)
	owed := 0.0
	for now := range tick.C {
		if ctx.Err() != nil || now.Sub(start) >= duration {
			break
		}
		owed += load(now.Sub(start)) * 0.01
		for ; owed >= 1; owed-- {
			g.offer(ctx)
		}
		if !now.After(nextSecond) {
			continue
		}
		nextSecond = nextSecond.Add(time.Second)
		p := g.second(ctx, cl, now.Sub(start), load(now.Sub(start)))
		if p.Nodes == 0 && len(timeline) > 0 {
			// The status call timed out: the cluster is as it was.
			last := timeline[len(timeline)-1]
			p.Nodes, p.Starting, p.MigrationAllowance, p.Utilization = last.Nodes, last.Starting, last.MigrationAllowance, last.Utilization
		}
		timeline = append(timeline, p)
		if len(timeline)%15 == 0 {
			fmt.Fprintf(progress, "%4.0fs offered %5.0f served %5.0f refused %5.0f p99 %6.1fms nodes %d migration %3.0f MiB/s\n",
				p.At.Seconds(), p.Offered, p.Served, p.Rejected, float64(p.P99.Microseconds())/1000, p.Nodes, p.MigrationAllowance/(1<<20))
		}
	}
	g.wait()
	return timeline
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

// retry runs f until it succeeds, for at most 30 s.
func retry(ctx context.Context, f func(ctx context.Context) error) error {
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

// second closes this second's counts into a timeline point.
func (g *generator) second(ctx context.Context, cl *client.Client, at time.Duration, offered float64) sim.ElasticPoint {
	g.mu.Lock()
	lat, errs := g.lat, g.errs
	g.lat, g.errs = nil, 0
	g.mu.Unlock()
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
