package scenario

// Shared helpers of the load-routing scenarios (meteorshower, horoscope,
// ecstore): work directories, in-process and real-process clusters, a Zipf
// key chooser, closed-loop load and latency summaries. Every identifier
// here starts with "lr" so that other scenarios' helpers cannot clash.

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/server"
)

// lrLogf writes one progress line.
func lrLogf(opts Options, format string, args ...any) {
	if opts.Progress == nil {
		return
	}
	fmt.Fprintf(opts.Progress, time.Now().Format("15:04:05")+" "+format+"\n", args...)
}

// lrStep is the length of one measured step: opts.Duration if set, else the
// scenario's default for its mode.
func lrStep(opts Options, full, quick time.Duration) time.Duration {
	switch {
	case opts.Duration > 0:
		return opts.Duration
	case opts.Quick:
		return quick
	default:
		return full
	}
}

// lrWorkDir returns opts.Dir/name (created), or a temporary directory that
// the returned cleanup removes.
func lrWorkDir(opts Options, name string) (string, func(), error) {
	if opts.Dir != "" {
		dir := filepath.Join(opts.Dir, name)
		if err := os.RemoveAll(dir); err != nil {
			return "", nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		return dir, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "tidekv-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// lrRedirectLog sends the standard logger (which in-process servers log
// to) to dir/servers.log until the returned function restores it, so that
// node chatter does not bury the report.
func lrRedirectLog(dir string) func() {
	f, err := os.OpenFile(filepath.Join(dir, "servers.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return func() {}
	}
	prev := log.Writer()
	log.SetOutput(f)
	return func() {
		log.SetOutput(prev)
		f.Close()
	}
}

// ---------------------------------------------------------------------------
// Keys and values.

// lrZipf draws item numbers 0..n-1 with P(rank k) ∝ 1/(k+1)^s, by inverse
// CDF (so any s ≥ 0 works, including YCSB's 0.99 and the classic 1.0 that
// math/rand/v2's Zipf cannot do). Ranks are mapped to items through a
// seeded permutation, so hot items are spread over the key space (and over
// ranges) the way YCSB's scrambled zipfian spreads them.
type lrZipf struct {
	*plZipf
	perm []int
}

func newLrZipf(n int, s float64, seed uint64) *lrZipf {
	return &lrZipf{plZipf: plNewZipf(n, s), perm: rand.New(rand.NewPCG(seed, 0x5eed)).Perm(n)}
}

// Rank draws a popularity rank (0 is the most popular).
func (z *lrZipf) Rank(r *rand.Rand) int { return z.next(r) }

// Next draws an item.
func (z *lrZipf) Next(r *rand.Rand) int { return z.perm[z.Rank(r)] }

// lrKey is item i's key under prefix, zero-padded so that keys sort by
// number and ranges can be split at item boundaries.
func lrKey(prefix string, i int) []byte { return fmt.Appendf(nil, "%s%06d", prefix, i) }

// lrValue returns a value of size bytes that starts with text.
func lrValue(text string, size int) []byte {
	v := make([]byte, max(size, len(text)))
	copy(v, text)
	for i := len(text); i < len(v); i++ {
		v[i] = 'a' + byte(i%26)
	}
	return v
}

// lrLoad writes items 0..n-1 under prefix with threads goroutines.
func lrLoad(ctx context.Context, c *client.Client, prefix string, n, size, threads int) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err = c.Put(pctx, lrKey(prefix, i), lrValue("v0;", size))
					cancel()
					if err == nil || ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("load %s: %w", lrKey(prefix, i), err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// ---------------------------------------------------------------------------
// Measurements.

// lrResult is what one measured run of operations produced.
type lrResult struct {
	Ops     int             // successful operations in the measured window
	Errors  int             // failed ones
	Elapsed time.Duration   // length of the measured window
	Lat     []time.Duration // latencies of the successful ones, sorted
}

func (r *lrResult) finish() { slices.Sort(r.Lat) }

// merge adds o (a run of the same operations) to r; call finish after the
// last merge.
func (r *lrResult) merge(o lrResult) {
	r.Ops += o.Ops
	r.Errors += o.Errors
	r.Elapsed += o.Elapsed
	r.Lat = append(r.Lat, o.Lat...)
}

// Rate is successful operations per second.
func (r lrResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Q returns the q-quantile latency (nearest rank; 0 without samples).
func (r lrResult) Q(q float64) time.Duration { return lrQuantile(r.Lat, q) }

func lrQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// lrMs formats a latency in milliseconds.
func lrMs(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0f", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f", ms)
	default:
		return fmt.Sprintf("%.2f", ms)
	}
}

// lrThousands formats n with thousands separators.
func lrThousands(n float64) string {
	s := strconv.FormatInt(int64(math.Round(n)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// lrClosedLoop runs op on threads goroutines back to back for warmup+d;
// only operations that start after warmup are measured. Each goroutine gets
// its own random source. An operation gets opTimeout (0: 5 s).
func lrClosedLoop(ctx context.Context, threads int, warmup, d, opTimeout time.Duration, seed uint64,
	op func(ctx context.Context, r *rand.Rand) error) lrResult {
	if opTimeout <= 0 {
		opTimeout = 5 * time.Second
	}
	start := time.Now()
	measureFrom, end := start.Add(warmup), start.Add(warmup+d)
	var mu sync.Mutex
	res := lrResult{Elapsed: d}
	var wg sync.WaitGroup
	for t := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(t)+1))
			var lat []time.Duration
			ops, errs := 0, 0
			for ctx.Err() == nil {
				began := time.Now()
				if !began.Before(end) {
					break
				}
				octx, cancel := context.WithTimeout(ctx, opTimeout)
				err := op(octx, r)
				cancel()
				if began.Before(measureFrom) {
					continue
				}
				if err != nil {
					errs++
					continue
				}
				ops++
				lat = append(lat, time.Since(began))
			}
			mu.Lock()
			res.Ops += ops
			res.Errors += errs
			res.Lat = append(res.Lat, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.finish()
	return res
}

// ---------------------------------------------------------------------------
// Memory of this process.

// lrMem is a memory sample of this process.
type lrMem struct {
	RSS, HWM   int64 // resident set and its peak (bytes), from /proc/self/status
	HeapInuse  uint64
	Goroutines int
}

// lrProcMem reads VmRSS and VmHWM of pid ("self" for this process).
func lrProcMem(pid string) (rss, hwm int64) {
	f, err := os.Open(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

// lrMiB formats bytes as MiB.
func lrMiB[T int64 | uint64](b T) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }

// ---------------------------------------------------------------------------
// In-process clusters.

// lrInProc is a cluster of in-process nodes on 127.0.0.1.
type lrInProc struct {
	Nodes []*server.Server
}

// lrStartInProc starts n nodes, data under dir/node<i>, node 1 creating the
// cluster and the others joining through it. adjust (if set) changes node
// i's (0-based) configuration. Placement rebalancing is off: the scenarios
// place replicas and leases themselves and must not have them moved.
func lrStartInProc(ctx context.Context, dir string, n int, adjust func(i int, c *server.Config)) (*lrInProc, error) {
	c := &lrInProc{}
	for i := range n {
		cfg := server.DefaultConfig()
		cfg.DataDir = filepath.Join(dir, fmt.Sprintf("node%d", i+1))
		cfg.GRPCAddr = "127.0.0.1:0"
		cfg.HTTPAddr = ""
		cfg.ReportInterval = time.Second
		cfg.Placement.Rebalance = false
		// Nodes in one process share one Go scheduler, so a queueing delay
		// is every node's at once: delay-based admission is off and the
		// in-flight bound alone sheds load (docs/admission.md).
		cfg.Admission.Target = 0
		if i > 0 {
			cfg.Join = []string{c.Nodes[0].Addr()}
		}
		if adjust != nil {
			adjust(i, &cfg)
		}
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		s, err := server.Start(sctx, cfg)
		cancel()
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("start node %d: %w", i+1, err)
		}
		c.Nodes = append(c.Nodes, s)
	}
	return c, nil
}

// Addrs returns the nodes' gRPC addresses.
func (c *lrInProc) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr()
	}
	return out
}

// Stop stops every node, last first.
func (c *lrInProc) Stop() {
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		c.Nodes[i].Stop()
	}
}

// ---------------------------------------------------------------------------
// Cluster layout through the client.

// lrWaitVoters waits until every user range has want voters.
func lrWaitVoters(ctx context.Context, c *client.Client, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := c.Ranges(rctx)
		cancel()
		if err != nil {
			last = err.Error()
		} else {
			ok := len(resp.GetRanges()) > 0
			var b strings.Builder
			for _, ri := range resp.GetRanges() {
				v := lrVoters(ri.GetDesc())
				fmt.Fprintf(&b, "r%d:%v ", ri.GetDesc().GetRangeId(), v)
				ok = ok && len(v) == want && len(v) == len(ri.GetDesc().GetReplicas())
			}
			if ok {
				return nil
			}
			last = b.String()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("ranges not replicated %d-way within %v: %s", want, timeout, last)
}

// lrNoRebalance sets the cluster setting rebalance=false: placement then
// only repairs (no lease or replica balancing, no load splits, no adaptive
// learners), so the layout a scenario sets up holds while it measures.
func lrNoRebalance(ctx context.Context, c *client.Client) error {
	err := lrRetry(ctx, 30*time.Second, func(ctx context.Context) error {
		_, err := c.Settings(ctx, map[string]string{"rebalance": "false"})
		return err
	})
	if err != nil {
		return fmt.Errorf("turn rebalancing off: %w", err)
	}
	return nil
}

// lrVoters lists the nodes holding voters of d.
func lrVoters(d *tidekvpb.RangeDescriptor) []uint64 {
	var out []uint64
	for _, rd := range d.GetReplicas() {
		if rd.GetType() == tidekvpb.ReplicaType_VOTER {
			out = append(out, rd.GetNodeId())
		}
	}
	slices.Sort(out)
	return out
}

// lrRangeOf returns the range of resp holding key.
func lrRangeOf(resp *tidekvpb.RangesResponse, key []byte) *tidekvpb.RangeDescriptor {
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		if string(key) >= string(d.GetStartKey()) && (len(d.GetEndKey()) == 0 || string(key) < string(d.GetEndKey())) {
			return d
		}
	}
	return nil
}

// lrLeaders asks every node which ranges it leads: range ID → node ID.
func lrLeaders(ctx context.Context, c *client.Client, addrs []string) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for _, a := range addrs {
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := c.LocalStatus(lctx, a)
		cancel()
		if err != nil {
			continue
		}
		for _, r := range st.GetReplicas() {
			if r.GetLeader() {
				out[r.GetRangeId()] = st.GetNode().GetNodeId()
			}
		}
	}
	return out
}

// lrMoveLease transfers range's lease to node and waits (up to timeout)
// until that node says it leads the range.
func lrMoveLease(ctx context.Context, c *client.Client, addrs []string, rangeID, node uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if lrLeaders(ctx, c, addrs)[rangeID] == node {
			return nil
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lastErr = c.TransferLease(tctx, rangeID, node)
		cancel()
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("lease of range %d did not move to node %d within %v (last error: %v)", rangeID, node, timeout, lastErr)
}

// lrRetry calls f (with a 10 s deadline each time) until it succeeds or
// timeout passes.
func lrRetry(ctx context.Context, timeout time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(fctx)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(300 * time.Millisecond)
	}
}
