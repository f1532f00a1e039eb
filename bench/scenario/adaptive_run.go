package scenario

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/server"
)

// adaptiveRun starts a cluster for c and runs the rising rates against it.
func adaptiveRun(ctx context.Context, p adaptiveParams, c adaptiveConfig, dir string, seed uint64, progress io.Writer) ([]adaptiveStep, error) {
	cl, admin, keys, err := adaptiveStart(ctx, p, c, dir, progress)
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	defer admin.Close()
	return adaptiveRunRates(ctx, p, c, cl, admin, keys, seed, progress)
}

// adaptiveStart starts a cluster for c, loads the keys and waits until the
// replication factor is reached and placement is quiet.
func adaptiveStart(ctx context.Context, p adaptiveParams, c adaptiveConfig, dir string, progress io.Writer) (*plInProc, *client.Client, [][]byte, error) {
	cl, err := plStartInProc(ctx, dir, 3, func(cfg *server.Config) {
		cfg.Admission.MaxInflight = p.inflight
		// Delay-based admission is off in process (plStartInProc); its
		// floor must still fit under the cap.
		cfg.Admission.MinInflight = min(cfg.Admission.MinInflight, p.inflight)
		cfg.Raft.ReplicationFactor = c.rf
		cfg.Placement.ReplicationFactor = c.rf
		// Load splits off, as the report says (one hot range): placement
		// holds back a learner while a load split of the range is pending,
		// and splits would also spread RF1's load by moving halves.
		cfg.Placement.SplitQPS = 1e9
		cfg.Placement.LoadSplitSlack = 0
		cfg.Placement.AdaptiveReadQPS = 1e9
		if c.adaptive {
			cfg.Placement.AdaptiveReadQPS = p.adaptiveQPS
		}
		cfg.Placement.MaxAdaptiveReplicas = 2
	})
	if err != nil {
		return nil, nil, nil, err
	}
	admin, err := cl.client(nil)
	if err != nil {
		cl.stop()
		return nil, nil, nil, err
	}
	plLogf(progress, "%s: 3 nodes up", c.name)

	keys, err := adaptiveLoadKeys(ctx, admin, p)
	if err != nil {
		admin.Close()
		cl.stop()
		return nil, nil, nil, err
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
	return cl, admin, keys, nil
}

// adaptiveLoadKeys writes p.keys keys of 1,010 bytes through a patient
// client (admission control also sheds writes) and returns them.
func adaptiveLoadKeys(ctx context.Context, admin *client.Client, p adaptiveParams) ([][]byte, error) {
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
	return keys, nil
}

// adaptiveRunRates sends c's reads at each of p.rates in turn to the loaded
// cluster and measures every step.
func adaptiveRunRates(ctx context.Context, p adaptiveParams, c adaptiveConfig, cl *plInProc, admin *client.Client, keys [][]byte, seed uint64, progress io.Writer) ([]adaptiveStep, error) {
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
		if p.settle > 0 {
			// Steady state: the step is measured after the configuration
			// has had p.settle at this rate to adapt (learners added and
			// serving); the settling reads are not counted.
			adaptiveLoad(ctx, read, keys, zipf, rng, rate, p.settle, p)
		}
		before := adaptiveCounters(ctx, cl)
		sctx, stopScores := context.WithCancel(ctx)
		scoresDone := make(chan [][]float64, 1)
		go func() { scoresDone <- adaptiveScores(sctx, loads, ids) }()
		s := adaptiveLoad(ctx, read, keys, zipf, rng, rate, p.step, p)
		stopScores()
		for _, xs := range <-scoresDone {
			s.scores = append(s.scores, plQuantile(xs, 0.5))
		}
		// Learners and per-node rates at the end of the step.
		s.learners = adaptiveLearners(ctx, admin)
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

// adaptiveLoad sends rate reads per second for d, open loop, and
// classifies their outcomes, in total and per second of scheduled send
// time.
func adaptiveLoad(ctx context.Context, read adaptiveRead, keys [][]byte, zipf *plZipf, rng *rand.Rand, rate int, d time.Duration, p adaptiveParams) adaptiveStep {
	s := adaptiveStep{rate: rate}
	secs := int((d + time.Second - 1) / time.Second)
	secSent, secFailed := make([]int64, secs), make([]atomic.Int64, secs)
	start := time.Now()
	second := func(at time.Time) int { return min(int(at.Sub(start)/time.Second), secs-1) }
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
				if outcome != readOK {
					secFailed[second(j.at)].Add(1)
				}
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	interval := time.Second / time.Duration(rate)
	var sent, dropped int64
	tick := time.NewTicker(time.Millisecond)
	for ctx.Err() == nil {
		now := <-tick.C
		el := now.Sub(start)
		if el >= d {
			break
		}
		due := int64(el / interval)
		for ; sent < due; sent++ {
			at := start.Add(time.Duration(sent) * interval)
			secSent[second(at)]++
			select {
			case jobs <- job{key: keys[zipf.next(rng)], at: at}:
			default:
				dropped++
				secFailed[second(at)].Add(1)
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
	s.secSent = secSent
	for i := range secFailed {
		s.secFailed = append(s.secFailed, secFailed[i].Load())
	}
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

// adaptiveLearners counts the adaptive learner replicas the range
// directory lists (0 if it cannot be read).
func adaptiveLearners(ctx context.Context, admin *client.Client) int {
	n := 0
	if resp, err := plRanges(ctx, admin); err == nil {
		for _, ri := range resp.GetRanges() {
			for _, rd := range ri.GetDesc().GetReplicas() {
				if rd.GetAdaptive() {
					n++
				}
			}
		}
	}
	return n
}
