package scenario

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
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
	"github.com/tidekv/tidekv/internal/server"
)

// adaptive reproduces ecStore's load-adaptive replication experiment:
// Zipf(1.0) reads at rising request rates against one hot range held by
//
//   - RF1: one replica; every read goes to one node;
//   - RF1+adaptive: one voter, plus up to two adaptive learner replicas
//     that placement adds when the range's read rate passes a threshold
//     (and removes when it cools), serving ANY reads;
//   - RF3: three voters from the start.
//
// Each node admits one KV request at a time (Admission.MaxInflight 1) and
// sheds the rest as "overloaded", so a single replica saturates visibly
// (an Erlang loss system) well before the shared CPU does. Reads are ANY
// reads, sent open loop at a fixed rate, one attempt each with a one-second
// deadline, so shed and late requests show up as failures instead of being
// retried away. Two ways of sending them are compared: the Go client (it
// picks the cheapest replica by load score and round trip, and must learn
// of learners added after it cached the range; one variant re-reads the
// range directory every second), and raw gRPC round robin over the range's
// current replicas, which shows what the replicas serve when reads are
// spread evenly.
//
// The nodes run in this process (server.Start), so that each configuration
// sets placement's replication factor, adaptive threshold and the admission
// bound directly (when this was written `tidekv server` had no flag for
// placement's replication factor).
func init() {
	register(Scenario{
		Name:  "adaptive",
		Short: "ecStore load-adaptive replication: Zipf reads at rising rates against RF1, RF1 + adaptive learners and RF3; failures and latency",
		Run:   runAdaptive,
	})
}

type adaptiveParams struct {
	keys        int
	rates       []int
	step        time.Duration
	inflight    int     // Admission.MaxInflight per node
	adaptiveQPS float64 // AdaptiveReadQPS of the adaptive configuration
	timeout     time.Duration
	workers     int // client goroutines; a request finding all busy counts as failed
}

func adaptiveDefaults(opts Options) adaptiveParams {
	p := adaptiveParams{keys: 20_000, rates: []int{1000, 2000, 4000, 8000, 12000}, step: 15 * time.Second,
		inflight: 1, adaptiveQPS: 300, timeout: time.Second, workers: 256}
	if opts.Quick {
		p.keys, p.rates, p.step = 2_000, []int{2000, 6000}, 4*time.Second
	}
	if opts.Duration > 0 {
		p.step = opts.Duration
	}
	return p
}

type adaptiveConfig struct {
	name     string
	rf       int
	adaptive bool
	reader   adaptiveReaderKind
}

// How reads are sent.
type adaptiveReaderKind int

const (
	// The Go client, ANY reads, one attempt: it picks the replica.
	readerClient adaptiveReaderKind = iota
	// The same, re-reading the range directory every second so that it
	// learns of learners added after it cached the range.
	readerClientRefresh
	// Raw gRPC Gets (ANY) sent round robin over the range's current
	// replicas (re-read every second): what the replicas can serve when
	// reads are spread evenly, whatever the client's replica choice does.
	readerRoundRobin
)

// adaptiveStep is one rate of one configuration.
type adaptiveStep struct {
	rate                        int
	sent, ok                    int64
	overloaded, timeouts, other int64
	dropped                     int64 // every client goroutine busy
	p50, p99                    time.Duration
	learners                    int
	served, rejected            []float64 // per node over the step (server metrics): reads served per second, requests shed
	scores                      []float64 // per node: median load score the node published during the step
}

func runAdaptive(ctx context.Context, opts Options, out io.Writer) error {
	p := adaptiveDefaults(opts)
	progress := opts.Progress
	dir, cleanup, err := plWorkDir(opts, "adaptive")
	if err != nil {
		return err
	}
	defer cleanup()
	// The in-process nodes log through the standard logger: into a file.
	logf, err := os.Create(filepath.Join(dir, "nodes.log"))
	if err != nil {
		return err
	}
	prevLog := log.Writer()
	log.SetOutput(logf)
	defer func() { log.SetOutput(prevLog); logf.Close() }()

	seed := opts.Seed
	if seed == 0 {
		seed = 1
	}
	start, load0 := time.Now(), plLoadAvg()
	configs := []adaptiveConfig{
		{"RF1, client", 1, false, readerClient},
		{"RF1 + adaptive, client", 1, true, readerClient},
		{"RF1 + adaptive, client refreshing ranges", 1, true, readerClientRefresh},
		{"RF3, client", 3, false, readerClient},
		{"RF1, round robin", 1, false, readerRoundRobin},
		{"RF1 + adaptive, round robin", 1, true, readerRoundRobin},
		{"RF3, round robin", 3, false, readerRoundRobin},
	}
	if opts.Quick {
		// The client alone and the client helped by re-reading ranges:
		// answers carry the range's generation, so the client should find
		// learners by itself.
		configs = []adaptiveConfig{configs[0], configs[1], configs[2], configs[3], configs[5], configs[6]}
	}
	results := map[string][]adaptiveStep{}
	for i, c := range configs {
		steps, err := adaptiveRun(ctx, p, c, filepath.Join(dir, fmt.Sprintf("c%d", i)), seed, progress)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		results[c.name] = steps
	}

	fmt.Fprintf(out, "## adaptive\n\n")
	fmt.Fprintf(out, "Machine load average (1 min) at start / end: %s / %s.\n\n", load0, plLoadAvg())
	fmt.Fprintf(out, "3 in-process nodes, Admission.MaxInflight %d per node, %d keys of 1,010 bytes in one range (load splits off), "+
		"Zipf(1.0) ANY reads sent open loop at each rate for %v (rates rise without a pause), one attempt per read, %v deadline, %d sending goroutines. "+
		"Adaptive: AdaptiveReadQPS %.0f, at most 2 learners. Quick: %v. Total %.0f s.\n\n",
		p.inflight, p.keys, p.step, p.timeout, p.workers, p.adaptiveQPS, opts.Quick, time.Since(start).Seconds())
	fmt.Fprintln(out, "Failed = overloaded (shed by admission control) + timed out + other errors + not sent (all client goroutines busy); latency over successful reads, from the scheduled send time.")
	fmt.Fprintln(out)
	var rows [][]string
	for _, c := range configs {
		for _, s := range results[c.name] {
			fail := s.overloaded + s.timeouts + s.other + s.dropped
			share := 0.0
			if s.sent > 0 {
				share = float64(fail) / float64(s.sent)
			}
			rows = append(rows, []string{c.name, strconv.Itoa(s.rate), fmt.Sprintf("%.0f", float64(s.ok)/p.step.Seconds()),
				fmt.Sprintf("%.1f%%", 100*share),
				fmt.Sprintf("%d / %d / %d / %d", s.overloaded, s.timeouts, s.other, s.dropped),
				adaptiveMs(s.p50), adaptiveMs(s.p99), strconv.Itoa(s.learners), adaptiveQPSList(s.served), adaptiveQPSList(s.rejected), adaptiveScoreList(s.scores)})
		}
	}
	plTable(out, []string{"configuration", "offered reads/s", "served reads/s", "failed", "overloaded / timeout / other / not sent",
		"p50 ms", "p99 ms", "adaptive learners at end", "reads served/s per node", "requests shed per node", "median load score per node"}, rows)
	if err := writeFigure(opts, out, "adaptive", "failures", adaptiveChart(configs, results)); err != nil {
		return err
	}
	return ctx.Err()
}

func adaptiveMs(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond))
}

func adaptiveQPSList(q []float64) string {
	s := ""
	for i, v := range q {
		if i > 0 {
			s += " / "
		}
		s += fmt.Sprintf("%.0f", v)
	}
	return s
}

// adaptiveRun starts a cluster for c and runs the rising rates against it.
func adaptiveRun(ctx context.Context, p adaptiveParams, c adaptiveConfig, dir string, seed uint64, progress io.Writer) ([]adaptiveStep, error) {
	cl, err := plStartInProc(ctx, dir, 3, func(cfg *server.Config) {
		cfg.Admission.MaxInflight = p.inflight
		// Delay-based admission is off in process (plStartInProc); its
		// floor must still fit under the cap.
		cfg.Admission.MinInflight = min(cfg.Admission.MinInflight, p.inflight)
		cfg.Raft.ReplicationFactor = c.rf
		cfg.Placement.ReplicationFactor = c.rf
		cfg.Placement.SplitQPS = 1e9
		cfg.Placement.AdaptiveReadQPS = 1e9
		if c.adaptive {
			cfg.Placement.AdaptiveReadQPS = p.adaptiveQPS
		}
		cfg.Placement.MaxAdaptiveReplicas = 2
	})
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	admin, err := cl.client(nil)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	plLogf(progress, "%s: 3 nodes up", c.name)

	// Load through a patient client (admission control also sheds writes).
	keys := make([][]byte, p.keys)
	for i := range keys {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d", i)
		keys[i] = fmt.Appendf(nil, "user%d", h.Sum64())
	}
	val := make([]byte, 1010)
	for i := range val {
		val[i] = 'a' + byte(i%26)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(keys)) || ctx.Err() != nil {
					return
				}
				var err error
				for range 20 {
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					err = admin.Put(cctx, keys[i], val)
					cancel()
					if err == nil || !errors.Is(err, client.ErrOverloaded) {
						break
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, fmt.Errorf("load: %w", err)
	default:
	}
	// Replication factor reached and placement quiet.
	var sig string
	lastChange := time.Now()
	plWait(ctx, 60*time.Second, 500*time.Millisecond, func() bool {
		resp, err := plRanges(ctx, admin)
		if err != nil {
			return false
		}
		ok := true
		s := ""
		for _, ri := range resp.GetRanges() {
			v := 0
			for _, rd := range ri.GetDesc().GetReplicas() {
				if rd.GetType() == tidekvpb.ReplicaType_VOTER {
					v++
				}
				s += fmt.Sprintf("%d:%d ", rd.GetNodeId(), rd.GetType())
			}
			s += fmt.Sprintf("L%d|", ri.GetLeaderNodeId())
			ok = ok && v == c.rf
		}
		if s != sig {
			sig, lastChange = s, time.Now()
		}
		return ok && time.Since(lastChange) > 3*time.Second
	})
	plLogf(progress, "%s: %d keys loaded, ranges %s", c.name, p.keys, sig)

	read, stopReader, err := adaptiveNewReader(ctx, c.reader, cl, admin, p.timeout)
	if err != nil {
		return nil, err
	}
	defer stopReader()
	// Warm up: connections, routing cache, load scores.
	for i := range 50 {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		read(cctx, keys[i%len(keys)])
		cancel()
	}
	// Raw Admin clients, one per node, to sample the load scores the
	// nodes publish (what the client ranks replicas by).
	var loads []tidekvpb.AdminClient
	var ids []uint64
	for _, n := range cl.nodes {
		ids = append(ids, n.NodeID())
	}
	for _, a := range cl.addrs() {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		loads = append(loads, tidekvpb.NewAdminClient(conn))
	}
	zipf := plNewZipf(len(keys), 1.0)
	rng := rand.New(rand.NewPCG(seed, uint64(c.rf)))
	var steps []adaptiveStep
	for _, rate := range p.rates {
		if ctx.Err() != nil {
			break
		}
		before := adaptiveCounters(ctx, cl)
		sctx, stopScores := context.WithCancel(ctx)
		scoresDone := make(chan [][]float64, 1)
		go func() { scoresDone <- adaptiveScores(sctx, loads, ids) }()
		s := adaptiveLoad(ctx, read, keys, zipf, rng, rate, p)
		stopScores()
		for _, xs := range <-scoresDone {
			s.scores = append(s.scores, plQuantile(xs, 0.5))
		}
		// Learners and per-node rates at the end of the step.
		if resp, err := plRanges(ctx, admin); err == nil {
			for _, ri := range resp.GetRanges() {
				for _, rd := range ri.GetDesc().GetReplicas() {
					if rd.GetAdaptive() {
						s.learners++
					}
				}
			}
		}
		after := adaptiveCounters(ctx, cl)
		for i := range after {
			s.served = append(s.served, (after[i][0]-before[i][0])/p.step.Seconds())
			s.rejected = append(s.rejected, after[i][1]-before[i][1])
		}
		fail := s.overloaded + s.timeouts + s.other + s.dropped
		plLogf(progress, "%s at %d/s: %d sent, %d ok, %d failed (%d overloaded, %d timeouts, %d other, %d not sent), p50 %s p99 %s ms, %d learners, served/s per node %s, shed per node %s",
			c.name, rate, s.sent, s.ok, fail, s.overloaded, s.timeouts, s.other, s.dropped, adaptiveMs(s.p50), adaptiveMs(s.p99), s.learners,
			adaptiveQPSList(s.served), adaptiveQPSList(s.rejected))
		plLogf(progress, "  median load scores per node: %s", adaptiveScoreList(s.scores))
		steps = append(steps, s)
	}
	return steps, nil
}

// adaptiveLoad sends rate reads per second for p.step, open loop, and
// classifies their outcomes.
func adaptiveLoad(ctx context.Context, read adaptiveRead, keys [][]byte, zipf *plZipf, rng *rand.Rand, rate int, p adaptiveParams) adaptiveStep {
	s := adaptiveStep{rate: rate}
	type job struct {
		key []byte
		at  time.Time
	}
	jobs := make(chan job, p.workers)
	var mu sync.Mutex
	var lats []float64
	var ok, overloaded, timeouts, other atomic.Int64
	var wg sync.WaitGroup
	for range p.workers {
		wg.Go(func() {
			var mine []float64
			for j := range jobs {
				cctx, cancel := context.WithDeadline(ctx, j.at.Add(p.timeout))
				outcome := read(cctx, j.key)
				cancel()
				switch outcome {
				case readOK:
					ok.Add(1)
					mine = append(mine, float64(time.Since(j.at)))
				case readOverloaded:
					overloaded.Add(1)
				case readTimeout:
					timeouts.Add(1)
				default:
					other.Add(1)
				}
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	var sent, dropped int64
	tick := time.NewTicker(time.Millisecond)
	for ctx.Err() == nil {
		now := <-tick.C
		el := now.Sub(start)
		if el >= p.step {
			break
		}
		due := int64(el / interval)
		for ; sent < due; sent++ {
			at := start.Add(time.Duration(sent) * interval)
			select {
			case jobs <- job{key: keys[zipf.next(rng)], at: at}:
			default:
				dropped++
			}
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	s.sent, s.dropped = sent, dropped
	s.ok, s.overloaded, s.timeouts, s.other = ok.Load(), overloaded.Load(), timeouts.Load(), other.Load()
	s.p50 = time.Duration(plQuantile(lats, 0.5))
	s.p99 = time.Duration(plQuantile(lats, 0.99))
	return s
}

// plZipf draws ranks 0..n-1 with P(k) ∝ 1/(k+1)^s (s = 1.0 is allowed,
// unlike math/rand's Zipf), by inverting the cumulative distribution.
type plZipf struct{ cdf []float64 }

func plNewZipf(n int, s float64) *plZipf {
	z := &plZipf{cdf: make([]float64, n)}
	sum := 0.0
	for k := range n {
		sum += 1 / math.Pow(float64(k+1), s)
		z.cdf[k] = sum
	}
	for k := range z.cdf {
		z.cdf[k] /= sum
	}
	return z
}

func (z *plZipf) next(rng *rand.Rand) int {
	u := rng.Float64()
	return min(sort.SearchFloat64s(z.cdf, u), len(z.cdf)-1)
}

// adaptiveCounters reads each node's served reads and shed requests.
func adaptiveCounters(ctx context.Context, c *plInProc) [][2]float64 {
	const served, shed = `tidekv_requests_total{op="get",code="OK"`, "tidekv_requests_rejected_total"
	out := make([][2]float64, len(c.nodes))
	for i, s := range c.nodes {
		if m, err := plScrape(ctx, s.HTTPAddr(), served, shed); err == nil {
			out[i] = [2]float64{m[served], m[shed]}
		}
	}
	return out
}

// adaptiveScores samples, every 250 ms until ctx ends, the load score each
// node publishes for itself.
func adaptiveScores(ctx context.Context, admins []tidekvpb.AdminClient, ids []uint64) [][]float64 {
	out := make([][]float64, len(admins))
	for ctx.Err() == nil {
		for i, a := range admins {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := a.NodeLoads(cctx, &tidekvpb.NodeLoadsRequest{})
			cancel()
			if err != nil {
				continue
			}
			// The node's own, freshest sample.
			var best *tidekvpb.NodeLoad
			for _, l := range resp.GetLoads() {
				if l.GetNodeId() == ids[i] && (best == nil || l.GetUnixNanos() > best.GetUnixNanos()) {
					best = l
				}
			}
			if best != nil {
				out[i] = append(out[i], best.GetScore())
			}
		}
		plSleep(ctx, 250*time.Millisecond)
	}
	return out
}

func adaptiveScoreList(q []float64) string {
	s := ""
	for i, v := range q {
		if i > 0 {
			s += " / "
		}
		s += fmt.Sprintf("%.1f", v)
	}
	return s
}

// adaptiveRead performs one read and classifies its outcome.
type adaptiveRead func(ctx context.Context, key []byte) readOutcome

type readOutcome int

const (
	readOK readOutcome = iota
	readOverloaded
	readTimeout
	readOther
)

// adaptiveNewReader returns the read function of kind and what stops it.
func adaptiveNewReader(ctx context.Context, kind adaptiveReaderKind, cl *plInProc, admin *client.Client, timeout time.Duration) (adaptiveRead, func(), error) {
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	every := func(fn func()) {
		wg.Go(func() {
			for rctx.Err() == nil {
				fn()
				plSleep(rctx, time.Second)
			}
		})
	}
	if kind == readerRoundRobin {
		rr := &adaptiveRoundRobin{conns: map[string]tidekvpb.KVClient{}}
		refresh := func() {
			if resp, err := plRanges(rctx, admin); err == nil {
				rr.install(resp)
			}
		}
		refresh()
		every(refresh)
		return rr.read, func() { stop(); wg.Wait(); rr.close() }, nil
	}
	rc, err := cl.client(func(cfg *client.Config) {
		cfg.MaxAttempts = 1
		cfg.AttemptTimeout = timeout
		cfg.DefaultRead = client.Any()
	})
	if err != nil {
		stop()
		return nil, nil, err
	}
	if kind == readerClientRefresh {
		every(func() {
			cctx, cancel := context.WithTimeout(rctx, time.Second)
			rc.Ranges(cctx)
			cancel()
		})
	}
	read := func(ctx context.Context, key []byte) readOutcome {
		_, err := rc.Get(ctx, key)
		switch {
		case err == nil || errors.Is(err, client.ErrNotFound):
			return readOK
		case errors.Is(err, client.ErrOverloaded):
			return readOverloaded
		case errors.Is(err, context.DeadlineExceeded):
			return readTimeout
		}
		return readOther
	}
	return read, func() { stop(); wg.Wait(); rc.Close() }, nil
}

// adaptiveRoundRobin sends each read to the next replica of the key's
// range, by raw gRPC.
type adaptiveRoundRobin struct {
	mu     sync.Mutex
	ranges []adaptiveRRRange
	conns  map[string]tidekvpb.KVClient
	closer []*grpc.ClientConn
	next   atomic.Uint64
}

type adaptiveRRRange struct {
	start, end []byte
	replicas   []tidekvpb.KVClient
}

func (rr *adaptiveRoundRobin) install(resp *tidekvpb.RangesResponse) {
	addrs := map[uint64]string{}
	for _, n := range resp.GetNodes() {
		addrs[n.GetNodeId()] = n.GetGrpcAddr()
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	var ranges []adaptiveRRRange
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		r := adaptiveRRRange{start: d.GetStartKey(), end: d.GetEndKey()}
		for _, rd := range d.GetReplicas() {
			a := addrs[rd.GetNodeId()]
			if a == "" {
				continue
			}
			kv := rr.conns[a]
			if kv == nil {
				conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					continue
				}
				rr.closer = append(rr.closer, conn)
				kv = tidekvpb.NewKVClient(conn)
				rr.conns[a] = kv
			}
			r.replicas = append(r.replicas, kv)
		}
		ranges = append(ranges, r)
	}
	rr.ranges = ranges
}

func (rr *adaptiveRoundRobin) read(ctx context.Context, key []byte) readOutcome {
	rr.mu.Lock()
	var reps []tidekvpb.KVClient
	for _, r := range rr.ranges {
		if string(key) >= string(r.start) && (len(r.end) == 0 || string(key) < string(r.end)) {
			reps = r.replicas
			break
		}
	}
	rr.mu.Unlock()
	if len(reps) == 0 {
		return readOther
	}
	kv := reps[rr.next.Add(1)%uint64(len(reps))]
	_, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: key, ReadMode: tidekvpb.ReadMode_ANY})
	switch status.Code(err) {
	case codes.OK:
		return readOK
	case codes.ResourceExhausted:
		return readOverloaded
	case codes.DeadlineExceeded:
		return readTimeout
	}
	return readOther
}

func (rr *adaptiveRoundRobin) close() {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for _, c := range rr.closer {
		c.Close()
	}
}
