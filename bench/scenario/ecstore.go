package scenario

// ecstore: admission under open-loop load above what the nodes can serve.
//
// Three `tidekv server` processes share one CPU (taskset), and this process,
// the load generator, runs on the other, so that offering three times what
// the nodes serve does not starve the generator itself. The keys are split
// in three ranges, one lease per node, and each node is sent requests for
// its own third: Zipf(1.0) reads (gRPC Gets in ANY mode, Redis GETs),
// writes (Puts, SETs) and a 50/50 mix. With --node-cpus each node runs in
// a cgroup of its own with that CPU quota (a sized node), so that what the
// nodes serve is their quota's, not what the generator leaves them. A
// closed-loop calibration first measures what the nodes serve per workload
// and protocol at saturation (the closed-loop peak); open-loop trials from
// there down, a fifth lower each, find the sustainable rate (the highest
// at which served requests' p99, from when they were due, is at most 50 ms
// with at most 1% failing); the open-loop generator then offers 0.5–3×
// that rate, each request at its own time however the earlier ones fared,
// without retries, so every refusal is visible. A step reports goodput, the
// refused, dropped (generator's own bound) and timed-out shares, latency
// of served requests from the actual send and from the schedule, how fast
// refusals came, the nodes' smallest admitted share, requests in flight and
// memory. Full runs repeat everything with delay-based admission off
// (`--admission-target 0`: the in-flight bound alone, the old behaviour).

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

func init() {
	register(Scenario{
		Name:  "ecstore",
		Short: "admission: open-loop reads, writes and a mix at 0.5-3x what the nodes serve, over gRPC and RESP, with and without delay-based admission (processes)",
		Run:   runECStore,
	})
}

const (
	ecsNodes       = 3
	ecsMaxInflight = 100
	ecsPrefix      = "ec/"
	ecsKeys        = 9000
	ecsValueSize   = 100
	ecsZipfS       = 1.0
	ecsTimeout     = 2 * time.Second
	// ecsMaxOutstanding bounds the generator's own requests in flight per
	// node (gRPC) or per connection (RESP): beyond it a scheduled request
	// is dropped and counted, so that the generator's memory is bounded.
	ecsMaxOutstanding = 5000
	ecsConnsPerNode   = 4
	ecsRESPConns      = 64 // per node: independent clients, one request at a time each
	ecsRESPPipeConns  = 8  // per node: an open-loop client's connections, pipelined
	ecsWorkers        = 64 // closed-loop calibration, per node
	// ecsP99Target, ecsRefusalTarget and ecsGoodputTarget are the issue's
	// targets: served requests within 50 ms at p99, refusals within 1 ms,
	// at least 90% of the sustainable rate served.
	ecsP99Target     = 50 * time.Millisecond
	ecsRefusalTarget = time.Millisecond
	ecsGoodputTarget = 0.9
	// ecsSustainTrials bounds the open-loop trials that look for the
	// sustainable rate, each ecsSustainStep below the last.
	ecsSustainTrials = 8
	ecsSustainStep   = 0.8
)

// ecsStep is one rate step's outcome.
type ecsStep struct {
	mode, proto, workload string
	multiple              float64 // offered / peak
	ratePerNode, peak     float64 // offered and sustainable, per node per second
	closedPeak            float64 // the closed-loop peak, per node per second
	elapsed               time.Duration

	offered, ok, rejected, dropped, timeouts, other int64
	lat, svc, rej                                   []time.Duration
	firstErr                                        string

	// The nodes, sampled every 250 ms: the extreme over nodes and samples.
	peakRSS, peakHeap, peakGoroutines float64
	peakInflight                      uint32
	minShare                          float64
	// The largest median queueing delay of an admission window and the
	// largest scheduler run-queue latency the nodes reported.
	peakDelay, peakSched time.Duration
	// notLive names the states other than live the cluster's status gave
	// any node while the step ran (suspect: its heartbeats were late).
	notLive map[string]bool
}

func (st ecsStep) failed() int64 { return st.rejected + st.dropped + st.timeouts + st.other }

// ecsMode is one cluster configuration.
type ecsMode struct {
	name string
	args []string
}

func runECStore(ctx context.Context, opts Options, out io.Writer) error {
	multiples := []float64{0.5, 1, 1.5, 2, 3}
	modes := []ecsMode{{"admission", nil}, {"count-only", []string{"--admission-target", "0"}}}
	if opts.Quick {
		multiples = []float64{1.5, 3}
		modes = modes[:1]
	}
	step := lrStep(opts, 6*time.Second, 1500*time.Millisecond)
	calib := lrStep(opts, 4*time.Second, 1500*time.Millisecond)
	dir, cleanup, err := lrWorkDir(opts, "ecstore")
	if err != nil {
		return err
	}
	defer cleanup()
	binary, err := lrBinary(opts, dir)
	if err != nil {
		return err
	}
	cpus, pinned := ecsPinning(opts)
	peaks := map[string]float64{}
	var steps []ecsStep
	for _, m := range modes {
		ms, err := ecsRunMode(ctx, opts, m, binary, dir, cpus, peaks, multiples, step, calib)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		steps = append(steps, ms...)
	}
	ecsReport(out, steps, pinned, opts.NodeCPUs, step, calib)
	for _, proto := range ecsProtos {
		if err := writeFigure(opts, out, "ecstore", "admission-"+proto, ecstoreChart(steps, proto)); err != nil {
			return err
		}
	}
	return nil
}

// ecsPinning puts the nodes on CPU 1 and this process on CPU 0 when the
// machine has two CPUs or more and taskset is there.
func ecsPinning(opts Options) ([]string, bool) {
	if runtime.NumCPU() < 2 {
		return nil, false
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil, false
	}
	if err := exec.Command("taskset", "-a", "-cp", "0", strconv.Itoa(os.Getpid())).Run(); err != nil {
		lrLogf(opts, "ecstore: could not pin the generator to CPU 0: %v", err)
		return nil, false
	}
	return []string{"1", "1", "1"}, true
}

// ecsUnpin gives this process every CPU back.
func ecsUnpin(pinned bool) {
	if pinned {
		_ = exec.Command("taskset", "-a", "-cp", "0-"+strconv.Itoa(runtime.NumCPU()-1), strconv.Itoa(os.Getpid())).Run()
	}
}

// ecsRunMode starts a cluster with m's flags and runs every series on it;
// peaks are measured by the first mode and reused by the others.
func ecsRunMode(ctx context.Context, opts Options, m ecsMode, binary, dir string, cpus []string, peaks map[string]float64,
	multiples []float64, step, calib time.Duration) ([]ecsStep, error) {
	defer ecsUnpin(cpus != nil)
	lrLogf(opts, "ecstore: %s: starting %d node processes with --max-inflight %d %v", m.name, ecsNodes, ecsMaxInflight, m.args)
	mdir := filepath.Join(dir, m.name)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return nil, err
	}
	cl, err := lrStartProcs(ctx, binary, mdir, ecsNodes, cpus, opts.NodeCPUs, append([]string{"--max-inflight", strconv.Itoa(ecsMaxInflight)}, m.args...))
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	if err := ecsSetup(ctx, opts, cl); err != nil {
		return nil, err
	}
	conns, redis, closeConns, err := ecsDial(cl)
	if err != nil {
		return nil, err
	}
	defer closeConns()
	value := lrValue("w;", ecsValueSize)
	calls, closeCalls, err := ecsCallers(cl.Addrs(), conns, value)
	if err != nil {
		return nil, err
	}
	defer closeCalls()
	var steps []ecsStep
	for _, proto := range ecsProtos {
		for _, wl := range []string{"reads", "writes", "mix"} {
			ss, err := ecsRunSeries(ctx, opts, m.name, cl, proto, wl, calls, conns, redis, value, peaks, multiples, step, calib)
			if err != nil {
				return nil, err
			}
			steps = append(steps, ss...)
		}
	}
	return steps, nil
}

// ecsDial opens ecsConnsPerNode gRPC connections to each node and lists
// the nodes' Redis addresses; closeAll closes the connections.
func ecsDial(cl *lrProcs) (conns [][]*grpc.ClientConn, redis []string, closeAll func(), err error) {
	closeAll = func() {
		for _, nc := range conns {
			for _, cc := range nc {
				cc.Close()
			}
		}
	}
	for i, a := range cl.Addrs() {
		conns = append(conns, nil)
		for range ecsConnsPerNode {
			cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				closeAll()
				return nil, nil, nil, err
			}
			conns[i] = append(conns[i], cc)
		}
		redis = append(redis, cl.RedisAddr(i))
	}
	return conns, redis, closeAll, nil
}

// ecsRunSeries runs one protocol and workload at each multiple of its
// peak, measuring the peak first unless an earlier mode has.
func ecsRunSeries(ctx context.Context, opts Options, mode string, cl *lrProcs, proto, wl string, calls map[string]ecsCall,
	conns [][]*grpc.ClientConn, redis []string, value []byte, peaks map[string]float64,
	multiples []float64, step, calib time.Duration) ([]ecsStep, error) {
	third := ecsKeys / ecsNodes
	zipf := newLrZipf(third, ecsZipfS, opts.Seed)
	choose := func(n int, r *rand.Rand) ecsOp {
		write := wl == "writes" || (wl == "mix" && r.IntN(2) == 0)
		return ecsOp{write: write, key: lrKey(ecsPrefix, n*third+zipf.Next(r))}
	}
	// The Go client and raw gRPC reach the same service: one peak,
	// measured with raw calls (the client's window would refuse
	// some of a saturating closed loop itself).
	name, calProto := "grpc/"+wl, "grpc"
	if strings.HasPrefix(proto, "resp") {
		name, calProto = "resp/"+wl, "resp"
	}
	if _, ok := peaks[name]; !ok {
		p, err := ecsPeak(ctx, calProto, calls[calProto], redis, calib, choose, value)
		if err != nil {
			return nil, err
		}
		peaks["closed/"+name] = p
		lrLogf(opts, "ecstore: %s closed-loop peak %.0f/s per node", name, p)
		// The calibration saturated the nodes: let their admission
		// recover its full share (a tenth per window) first.
		time.Sleep(1500 * time.Millisecond)
		if peaks[name], err = ecsSustainable(ctx, opts, cl, calProto, calls[calProto], conns, redis, choose, value, p, calib); err != nil {
			return nil, err
		}
	}
	var steps []ecsStep
	for i, k := range multiples {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rate := k * peaks[name]
		lrLogf(opts, "ecstore: %s: %s/%s at %.1fx (%.0f/s per node) for %v", mode, proto, wl, k, rate, step)
		st, err := ecsRunStep(ctx, cl, proto, calls[proto], conns, redis, choose, value, rate, step, opts.Seed+uint64(i))
		if err != nil {
			return nil, err
		}
		st.mode, st.proto, st.workload, st.multiple, st.peak, st.closedPeak = mode, proto, wl, k, peaks[name], peaks["closed/"+name]
		steps = append(steps, st)
		time.Sleep(500 * time.Millisecond) // let the backlog drain
	}
	return steps, nil
}

// ecsSustainable is the sustainable rate per node: open-loop trials of d
// from the closed-loop peak down, each ecsSustainStep below the last, until
// one serves at least 99% of what it offered with the p99 from schedule
// within ecsP99Target (from schedule, so that a rate at which requests
// queue in the generator does not count as sustained). None does within
// ecsSustainTrials: the last trial's rate, reported as such.
func ecsSustainable(ctx context.Context, opts Options, cl *lrProcs, proto string, call ecsCall, conns [][]*grpc.ClientConn, redis []string,
	choose func(int, *rand.Rand) ecsOp, value []byte, peak float64, d time.Duration) (float64, error) {
	rate := peak
	for i := range ecsSustainTrials {
		st, err := ecsRunStep(ctx, cl, proto, call, conns, redis, choose, value, rate, d, opts.Seed+100+uint64(i))
		if err != nil {
			return 0, err
		}
		p99 := lrQuantile(st.lat, 0.99)
		ok := st.offered > 0 && float64(st.failed()) <= 0.01*float64(st.offered) && p99 <= ecsP99Target
		lrLogf(opts, "ecstore: %s sustainable? %.0f/s per node: p99 from schedule %v, %d of %d failed: %v", proto, rate, p99, st.failed(), st.offered, ok)
		time.Sleep(500 * time.Millisecond)
		if ok {
			return rate, nil
		}
		if i < ecsSustainTrials-1 {
			rate *= ecsSustainStep
		}
	}
	lrLogf(opts, "ecstore: %s: no trial sustained; using the lowest tried, %.0f/s per node", proto, rate)
	return rate, nil
}

// ecsProtos are the ways requests reach the nodes: raw gRPC calls (a
// client that ignores admission), the Go client (which keeps to the share
// an overloaded node admits) and the Redis protocol, from a pool of
// clients each waiting for its answer (resp) and from an open-loop client
// pipelining on a few connections (resp-pipe).
var ecsProtos = []string{"grpc", "client", "resp", "resp-pipe"}

// ecsCallers returns the call of each gRPC-based protocol.
func ecsCallers(addrs []string, conns [][]*grpc.ClientConn, value []byte) (map[string]ecsCall, func(), error) {
	ccfg := client.DefaultConfig()
	ccfg.Addrs = addrs
	// Every refusal must be visible: no retries beyond one redirect.
	ccfg.MaxAttempts, ccfg.FailFastOnOverload = 2, true
	// Its window also closes on measured queueing (docs/admission.md):
	// off by default, on here, where the client has a core of its own.
	ccfg.ReadDelayTarget = 20 * time.Millisecond
	cl, err := client.New(ccfg)
	if err != nil {
		return nil, nil, err
	}
	return map[string]ecsCall{"grpc": ecsRawCall(conns, value), "client": ecsClientCall(cl, value)}, func() { cl.Close() }, nil
}

// ecsSetup waits for the cluster, splits the keys in three ranges with one
// lease per node and loads them.
func ecsSetup(ctx context.Context, opts Options, cl *lrProcs) error {
	ccfg := client.DefaultConfig()
	ccfg.Addrs = cl.Addrs()
	admin, err := client.New(ccfg)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := lrWaitVoters(ctx, admin, ecsNodes, 60*time.Second); err != nil {
		return err
	}
	if err := lrNoRebalance(ctx, admin); err != nil {
		return err
	}
	third := ecsKeys / ecsNodes
	for q := range ecsNodes {
		split := []byte(ecsPrefix)
		if q > 0 {
			split = lrKey(ecsPrefix, q*third)
		}
		var resp *tidekvpb.SplitResponse
		if err := lrRetry(ctx, 30*time.Second, func(ctx context.Context) (err error) {
			resp, err = admin.Split(ctx, split)
			return err
		}); err != nil {
			return fmt.Errorf("split at %q: %w", split, err)
		}
		if err := lrMoveLease(ctx, admin, cl.Addrs(), resp.GetRight().GetRangeId(), cl.ID(q), 30*time.Second); err != nil {
			return err
		}
	}
	lrLogf(opts, "ecstore: loading %d keys of %d B", ecsKeys, ecsValueSize)
	if err := lrLoad(ctx, admin, ecsPrefix, ecsKeys, ecsValueSize, 16); err != nil {
		return err
	}
	return lrWaitVoters(ctx, admin, ecsNodes, 60*time.Second)
}

// ecsPeak is what the nodes serve closed-loop, per node per second.
func ecsPeak(ctx context.Context, proto string, call ecsCall, redis []string, d time.Duration,
	choose func(int, *rand.Rand) ecsOp, value []byte) (float64, error) {
	if proto == "resp" {
		do, closeAll, err := ecsRESPDo(redis, ecsWorkers, value)
		if err != nil {
			return 0, err
		}
		defer closeAll()
		return ecsCalibrate(ctx, d, ecsWorkers, len(redis), choose, do), nil
	}
	return ecsCalibrate(ctx, d, ecsWorkers, len(redis), choose, func(n, _ int, op ecsOp) error {
		cctx, cancel := context.WithTimeout(ctx, ecsTimeout)
		defer cancel()
		return call(cctx, n, op)
	}), nil
}

// ecsRunStep offers rate requests/s per node for d and collects the
// outcome and the nodes' state.
func ecsRunStep(ctx context.Context, cl *lrProcs, proto string, call ecsCall, conns [][]*grpc.ClientConn, redis []string,
	choose func(int, *rand.Rand) ecsOp, value []byte, rate float64, d time.Duration, seed uint64) (ecsStep, error) {
	rec := &ecsRecorder{}
	var snd ecsSender
	switch proto {
	case "resp":
		r, err := newECSRESP(redis, ecsRESPConns, value, rec)
		if err != nil {
			return ecsStep{}, err
		}
		snd = r
	case "resp-pipe":
		r, err := newECSRESPPipe(redis, ecsRESPPipeConns, value, rec)
		if err != nil {
			return ecsStep{}, err
		}
		snd = r
	default:
		snd = newECSCalls(ctx, len(conns), call, rec)
	}
	st := ecsStep{ratePerNode: rate, elapsed: d, minShare: 1, notLive: map[string]bool{}}
	stop := ecsSample(ctx, cl, conns, &st)
	ecsSchedule(ctx, len(conns), rate, d, seed, choose, snd, rec)
	stop()
	st.offered, st.ok, st.rejected, st.dropped = rec.offered.Load(), rec.ok.Load(), rec.rejected.Load(), rec.dropped.Load()
	st.timeouts, st.other, st.firstErr = rec.timeouts.Load(), rec.other.Load(), rec.firstErr
	st.lat, st.svc, st.rej = ecsSorted(rec.lat), ecsSorted(rec.svc), ecsSorted(rec.rej)
	return st, nil
}

// ecsSample samples the nodes' memory and admission every 250 ms into st
// until the returned stop is called.
func ecsSample(ctx context.Context, cl *lrProcs, conns [][]*grpc.ClientConn, st *ecsStep) (stop func()) {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			lctx, lcancel := context.WithTimeout(sctx, 200*time.Millisecond)
			status, err := tidekvpb.NewAdminClient(conns[0][0]).Status(lctx, &tidekvpb.StatusRequest{})
			lcancel()
			for _, n := range status.GetNodes() {
				if s := n.GetState(); err == nil && s != "live" && s != "" {
					st.notLive[s] = true
				}
			}
			for i := range ecsNodes {
				rss, _ := lrProcMem(strconv.Itoa(cl.Pid(i)))
				st.peakRSS = max(st.peakRSS, float64(rss))
				if m, err := lrScrape(sctx, cl.HTTPAddr(i)); err == nil {
					st.peakHeap = max(st.peakHeap, m["go_memstats_heap_inuse_bytes"])
					st.peakGoroutines = max(st.peakGoroutines, m["go_goroutines"])
					st.peakSched = max(st.peakSched, time.Duration(m["tidekv_scheduler_latency_seconds"]*float64(time.Second)))
				}
				lctx, lcancel := context.WithTimeout(sctx, 200*time.Millisecond)
				resp, err := tidekvpb.NewAdminClient(conns[i][0]).NodeLoads(lctx, &tidekvpb.NodeLoadsRequest{})
				lcancel()
				for _, l := range resp.GetLoads() {
					if err == nil && l.GetNodeId() == cl.ID(i) {
						st.peakInflight = max(st.peakInflight, l.GetQueueDepth())
						st.peakDelay = max(st.peakDelay, time.Duration(l.GetQueueDelayMs()*float64(time.Millisecond)))
						if s := l.GetAdmitShare(); s > 0 {
							st.minShare = min(st.minShare, s)
						}
					}
				}
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}
