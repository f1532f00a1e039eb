package scenario

// ecstore: admission control under rising open-loop load.
//
// Three `tidekv server` processes admit at most 100 KV requests in flight
// each (--max-inflight 100, server.Config.MaxInflightRequests); past that a
// node answers at once with OVERLOADED ("overloaded, retry"). An open-loop
// generator (this process) schedules Zipf(1.0) point reads at a fixed rate
// per node, each request at its own time whatever happened to earlier
// ones, so that an overloaded node sees its backlog grow rather than a
// closed loop slowing down to match it. Requests are raw gRPC Gets in ANY
// mode sent to one chosen node (each node holds a replica of every range),
// with no retries, so every rejection is visible. A second series does the
// same with Puts, each node receiving writes for the third of the keys whose
// range it leads (writes wait for a Raft commit, so they occupy admission
// slots far longer than reads). The rate rises step by step; each step
// reports what was offered, what was served, what was rejected, the
// latency of the served requests (from the scheduled send time, so
// queueing in the generator counts too, and from the actual send), the
// nodes' admitted requests in flight (Admin.NodeLoads), and their memory:
// resident set from /proc/PID/status, Go heap and goroutines from /metrics.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

func init() {
	register(Scenario{
		Name:  "ecstore",
		Short: "admission control: open-loop Zipf(1.0) reads at rising rates per node against a 100-request in-flight bound (processes)",
		Run:   runECStore,
	})
}

const (
	ecsNodes       = 3
	ecsMaxInflight = 100
	ecsPrefix      = "ec/"
	ecsValueSize   = 100
	ecsZipfS       = 1.0
	ecsTimeout     = 2 * time.Second
	// ecsMaxOutstanding bounds the generator's own requests in flight per
	// node: beyond it a scheduled request is dropped (and counted) instead
	// of started, so that the generator's memory is bounded too.
	ecsMaxOutstanding = 5000
	ecsConnsPerNode   = 4
)

// ecsStep is one rate step's outcome.
type ecsStep struct {
	series      string
	ratePerNode float64
	offered     int64 // scheduled requests
	ok          int64
	rejected    int64 // OVERLOADED
	dropped     int64 // not sent: the generator's own bound was reached
	timeouts    int64
	other       int64
	elapsed     time.Duration
	lat         []time.Duration // served: from the scheduled send time
	svc         []time.Duration // served: from the actual send
	firstErr    string
	// The nodes, sampled every 250 ms during the step: the largest value
	// of any node.
	peakRSS, peakHeap, peakGoroutines float64
	peakInflight                      uint32  // requests admitted and not finished (NodeLoads queue_depth)
	serverRejected                    float64 // tidekv_requests_rejected_total, all nodes, during the step
}

// ecsNodeMem is one node's memory.
type ecsNodeMem struct{ rss, hwm, heap, goroutines float64 }

func ecsMem(ctx context.Context, cl *lrProcs) []ecsNodeMem {
	out := make([]ecsNodeMem, ecsNodes)
	for i := range out {
		rss, hwm := lrProcMem(strconv.Itoa(cl.Pid(i)))
		out[i].rss, out[i].hwm = float64(rss), float64(hwm)
		if m, err := lrScrape(ctx, cl.HTTPAddr(i)); err == nil {
			out[i].heap, out[i].goroutines = m["go_memstats_heap_inuse_bytes"], m["go_goroutines"]
		}
	}
	return out
}

func ecsRejected(ctx context.Context, cl *lrProcs) float64 {
	sum := 0.0
	for i := range ecsNodes {
		if m, err := lrScrape(ctx, cl.HTTPAddr(i)); err == nil {
			sum += m["tidekv_requests_rejected_total"]
		}
	}
	return sum
}

func runECStore(ctx context.Context, opts Options, out io.Writer) error {
	rates := []float64{1000, 2000, 4000, 8000, 16000}
	wrates := []float64{500, 1000, 2000, 4000, 8000}
	keys := 9000
	if opts.Quick {
		rates = []float64{1000, 4000, 16000}
		wrates = []float64{500, 2000, 8000}
		keys = 3000
	}
	step := lrStep(opts, 8*time.Second, 1500*time.Millisecond)
	dir, cleanup, err := lrWorkDir(opts, "ecstore")
	if err != nil {
		return err
	}
	defer cleanup()
	binary, err := lrBinary(opts, dir)
	if err != nil {
		return err
	}
	lrLogf(opts, "ecstore: starting %d node processes with --max-inflight %d in %s", ecsNodes, ecsMaxInflight, dir)
	cl, err := lrStartProcs(ctx, binary, dir, ecsNodes, nil, []string{"--max-inflight", strconv.Itoa(ecsMaxInflight)})
	if err != nil {
		return err
	}
	defer cl.Stop()
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
	// Three ranges of the keys, one lease per node, for the write series.
	third := keys / ecsNodes
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
	lrLogf(opts, "ecstore: loading %d keys of %d B", keys, ecsValueSize)
	if err := lrLoad(ctx, admin, ecsPrefix, keys, ecsValueSize, 16); err != nil {
		return err
	}
	// Every node must hold every key before ANY reads are sent to it.
	if err := lrWaitVoters(ctx, admin, ecsNodes, 60*time.Second); err != nil {
		return err
	}
	time.Sleep(time.Second)

	var conns [][]*grpc.ClientConn
	for _, a := range cl.Addrs() {
		var nc []*grpc.ClientConn
		for range ecsConnsPerNode {
			cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return err
			}
			defer cc.Close()
			nc = append(nc, cc)
		}
		conns = append(conns, nc)
	}
	// Reads: any key, any node (every node holds every range).
	zipf := newLrZipf(keys, ecsZipfS, opts.Seed)
	readOne := func(_ int, r *rand.Rand) func(context.Context, tidekvpb.KVClient) error {
		req := &tidekvpb.GetRequest{Key: lrKey(ecsPrefix, zipf.Next(r)), ReadMode: tidekvpb.ReadMode_ANY}
		return func(ctx context.Context, kv tidekvpb.KVClient) error {
			_, err := kv.Get(ctx, req)
			return err
		}
	}
	// Writes: node n leads the n-th third of the keys; Zipf within it.
	wzipf := newLrZipf(third, ecsZipfS, opts.Seed+1)
	value := lrValue("w;", ecsValueSize)
	writeOne := func(n int, r *rand.Rand) func(context.Context, tidekvpb.KVClient) error {
		req := &tidekvpb.PutRequest{Key: lrKey(ecsPrefix, n*third+wzipf.Next(r)), Value: value}
		return func(ctx context.Context, kv tidekvpb.KVClient) error {
			_, err := kv.Put(ctx, req)
			return err
		}
	}

	memBefore := ecsMem(ctx, cl)
	var steps []ecsStep
	for _, series := range []struct {
		name    string
		rates   []float64
		prepare ecsPrepare
	}{{"reads", rates, readOne}, {"writes", wrates, writeOne}} {
		for si, rate := range series.rates {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			lrLogf(opts, "ecstore: %s, %.0f/s per node (%.0f total) for %v", series.name, rate, rate*ecsNodes, step)
			rejBefore := ecsRejected(ctx, cl)
			st := ecsRun(ctx, cl, conns, series.prepare, rate, step, opts.Seed+uint64(si))
			st.series = series.name
			st.serverRejected = ecsRejected(ctx, cl) - rejBefore
			steps = append(steps, st)
			// Let the backlog drain before the next step.
			time.Sleep(time.Second)
		}
	}
	memAfter := ecsMem(ctx, cl)

	fmt.Fprintf(out, "## ecstore: admission control under rising open-loop load\n\n")
	fmt.Fprintf(out, "%d `tidekv server` processes (replication factor 3, Pebble), each started with `--max-inflight %d` "+
		"(more KV requests in flight are answered at once with OVERLOADED). Open-loop generator in a separate process: "+
		"Zipf(%.1f) over %d keys of %d B, scheduled at the given rate per node; reads are raw gRPC ANY-mode Gets to that node "+
		"(every node holds every range), writes raw gRPC Puts of the third of the keys whose range that node leads; "+
		"no retries, %v timeout, at most %d outstanding per node in the generator (beyond: dropped, counted). %v per step. "+
		"Latency of served requests is from the scheduled send time (so the generator's own lag counts); "+
		"\"from send\" starts when the request was actually sent. Node columns: the largest value among the nodes, "+
		"sampled every 250 ms during the step (in flight = requests past admission and not finished, from Admin.NodeLoads; "+
		"RSS from /proc; heap and goroutines from /metrics).\n\n",
		ecsNodes, ecsMaxInflight, ecsZipfS, keys, ecsValueSize, ecsTimeout, ecsMaxOutstanding, step)
	fmt.Fprintf(out, "| series | offered/node | offered total/s | served/s | rejected (client) | rejected (servers' counter) | dropped in generator | timeouts+errors | p50 ms | p99 ms | p99 from send ms | node peak in flight | node peak RSS MiB | node peak heap MiB | node peak goroutines |\n")
	fmt.Fprintf(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, st := range steps {
		off := float64(st.offered)
		pct := func(n float64) string {
			if off == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f%%", 100*n/off)
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %.0f | %.0f | %.0f |\n",
			st.series, lrThousands(st.ratePerNode), lrThousands(off/st.elapsed.Seconds()), lrThousands(float64(st.ok)/st.elapsed.Seconds()),
			pct(float64(st.rejected)), pct(st.serverRejected), pct(float64(st.dropped)), pct(float64(st.timeouts+st.other)),
			lrMs(lrQuantile(st.lat, 0.5)), lrMs(lrQuantile(st.lat, 0.99)), lrMs(lrQuantile(st.svc, 0.99)), st.peakInflight,
			st.peakRSS/(1<<20), st.peakHeap/(1<<20), st.peakGoroutines)
	}
	fmt.Fprintf(out, "\nNode memory before the first step → 1 s after the last (RSS MiB, peak RSS (VmHWM) MiB over the node's life, Go heap in use MiB, goroutines):\n\n")
	fmt.Fprintf(out, "| node | RSS before | RSS after | VmHWM | heap before | heap after | goroutines before | goroutines after |\n|---|---|---|---|---|---|---|---|\n")
	for i := range ecsNodes {
		b, a := memBefore[i], memAfter[i]
		fmt.Fprintf(out, "| %d | %.0f | %.0f | %.0f | %.1f | %.1f | %.0f | %.0f |\n", i+1,
			b.rss/(1<<20), a.rss/(1<<20), a.hwm/(1<<20), b.heap/(1<<20), a.heap/(1<<20), b.goroutines, a.goroutines)
	}
	for _, st := range steps {
		if st.firstErr != "" {
			fmt.Fprintf(out, "\nFirst error other than overload or timeout at %s/node: %s\n", lrThousands(st.ratePerNode), st.firstErr)
		}
	}
	fmt.Fprintln(out)
	return writeFigure(opts, out, "ecstore", "admission", ecstoreChart(steps))
}

// ecsPrepare chooses the next request to node n (in the node's generator
// goroutine, with its random source) and returns the call that sends it.
type ecsPrepare func(n int, r *rand.Rand) func(ctx context.Context, kv tidekvpb.KVClient) error

// ecsRun offers rate requests/s to each node for d and collects the
// outcome.
func ecsRun(ctx context.Context, cl *lrProcs, conns [][]*grpc.ClientConn, prepare ecsPrepare, rate float64, d time.Duration, seed uint64) ecsStep {
	st := ecsStep{ratePerNode: rate, elapsed: d}
	var offered, ok, rejected, dropped, timeouts, other atomic.Int64
	var mu sync.Mutex
	var firstErr string
	var lat, svc []time.Duration
	var reqWG sync.WaitGroup

	// The nodes' memory, sampled during the step.
	sctx, stopSampler := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			for _, m := range ecsMem(sctx, cl) {
				st.peakRSS = max(st.peakRSS, m.rss)
				st.peakHeap = max(st.peakHeap, m.heap)
				st.peakGoroutines = max(st.peakGoroutines, m.goroutines)
			}
			for n := range conns {
				lctx, cancel := context.WithTimeout(sctx, 200*time.Millisecond)
				resp, err := tidekvpb.NewAdminClient(conns[n][0]).NodeLoads(lctx, &tidekvpb.NodeLoadsRequest{})
				cancel()
				for _, l := range resp.GetLoads() {
					if err == nil && l.GetNodeId() == cl.ID(n) {
						st.peakInflight = max(st.peakInflight, l.GetQueueDepth())
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

	start := time.Now()
	var genWG sync.WaitGroup
	for n := range conns {
		genWG.Add(1)
		go func() {
			defer genWG.Done()
			r := rand.New(rand.NewPCG(seed, uint64(n)+1))
			kv := make([]tidekvpb.KVClient, len(conns[n]))
			for i, cc := range conns[n] {
				kv[i] = tidekvpb.NewKVClient(cc)
			}
			var outstanding atomic.Int64
			interval := float64(time.Second) / rate
			var sent int64
			for ctx.Err() == nil {
				now := time.Now()
				if now.Sub(start) >= d {
					return
				}
				// Requests 0..due-1 are scheduled at or before now.
				due := int64(float64(now.Sub(start))/interval) + 1
				for ; sent < due; sent++ {
					offered.Add(1)
					if outstanding.Load() >= ecsMaxOutstanding {
						dropped.Add(1)
						continue
					}
					sched := start.Add(time.Duration(float64(sent) * interval))
					call := prepare(n, r)
					kvc := kv[sent%int64(len(kv))]
					outstanding.Add(1)
					reqWG.Add(1)
					go func() {
						defer reqWG.Done()
						defer outstanding.Add(-1)
						rctx, cancel := context.WithDeadline(ctx, sched.Add(ecsTimeout))
						sentAt := time.Now()
						err := call(rctx, kvc)
						cancel()
						done := time.Now()
						switch {
						case err == nil:
							ok.Add(1)
							mu.Lock()
							lat = append(lat, done.Sub(sched))
							svc = append(svc, done.Sub(sentAt))
							mu.Unlock()
						case ecsOverloaded(err):
							rejected.Add(1)
						case status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
							timeouts.Add(1)
						default:
							other.Add(1)
							mu.Lock()
							if firstErr == "" {
								firstErr = err.Error()
							}
							mu.Unlock()
						}
					}()
				}
				// Sleep until the next request is due (timers are coarse, so
				// requests go out in small bursts at high rates).
				next := start.Add(time.Duration(float64(sent) * interval))
				if w := time.Until(next); w > 0 {
					time.Sleep(w)
				}
			}
		}()
	}
	genWG.Wait()
	reqWG.Wait()
	stopSampler()
	<-samplerDone
	slices.Sort(lat)
	slices.Sort(svc)
	st.offered, st.ok, st.rejected, st.dropped = offered.Load(), ok.Load(), rejected.Load(), dropped.Load()
	st.timeouts, st.other, st.lat, st.svc, st.firstErr = timeouts.Load(), other.Load(), lat, svc, firstErr
	return st
}

// ecsOverloaded reports whether err is a node's "overloaded, retry".
func ecsOverloaded(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if ed, ok := d.(*tidekvpb.ErrorDetail); ok {
			return ed.GetKind() == tidekvpb.ErrorKind_OVERLOADED
		}
	}
	return st.Code() == codes.ResourceExhausted
}
