package scenario

// Helpers of the placement and elasticity scenarios (scaleout.go,
// partitioning.go, adaptive.go): clusters of real `tidekv server`
// processes, metrics scraping, a counting bench.Store, small statistics
// and markdown tables. Every identifier here starts with "pl" so that the
// other scenario files of the package can name their own helpers freely.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/bench"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/launcher"
)

// plHost is where every node listens.
const plHost = "127.0.0.1"

// plLogf writes one timestamped progress line.
func plLogf(w io.Writer, format string, args ...any) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// plWorkDir returns the directory a scenario keeps its clusters in:
// <opts.Dir>/<name> (kept afterwards) or a temporary one (removed by the
// returned cleanup).
func plWorkDir(opts Options, name string) (string, func(), error) {
	if opts.Dir != "" {
		d := filepath.Join(opts.Dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", nil, err
		}
		return d, func() {}, nil
	}
	d, err := os.MkdirTemp("", "tidekv-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// plBinary returns the tidekv binary to run: opts.Binary, else this
// executable unless it is a test binary (the CLI is tidekv itself), else
// one built into dir from the module.
func plBinary(ctx context.Context, opts Options, dir string) (string, error) {
	if opts.Binary != "" {
		return filepath.Abs(opts.Binary)
	}
	if exe, err := os.Executable(); err == nil && !strings.HasSuffix(filepath.Base(exe), ".test") {
		return exe, nil
	}
	out := filepath.Join(dir, "tidekv")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/tidekv/tidekv/cmd/tidekv")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("no tidekv binary (--binary) and building one failed: %v\n%s", err, b)
	}
	return out, nil
}

// plProcs is a local cluster of tidekv processes of which nodes are started
// one at a time (node 1 creates the cluster).
type plProcs struct {
	lc       *launcher.Cluster
	cl       *client.Client
	progress io.Writer
}

// plStartProcs prepares a cluster of up to maxNodes processes in dir and
// starts node 1. nodeCPUs sizes every node (0: unsized); extra are added
// to every node's arguments.
func plStartProcs(ctx context.Context, binary, dir string, maxNodes int, nodeCPUs float64, extra []string, progress io.Writer) (*plProcs, error) {
	base, err := launcher.FreeBasePort(plHost, maxNodes)
	if err != nil {
		return nil, err
	}
	cfg := launcher.DefaultConfig()
	cfg.Nodes, cfg.DataDir, cfg.Host, cfg.BasePort, cfg.Binary = maxNodes, dir, plHost, base, binary
	cfg.ExtraArgs, cfg.NodeCPUs = extra, nodeCPUs
	lc, err := launcher.NewCluster(cfg)
	if err != nil {
		return nil, err
	}
	// Node 1 is the seed: the client learns the others from the cluster,
	// and nodes not started yet are never dialled.
	ccfg := client.DefaultConfig()
	ccfg.Addrs = []string{cfg.Node(1).GRPCAddr}
	cl, err := client.New(ccfg)
	if err != nil {
		return nil, err
	}
	p := &plProcs{lc: lc, cl: cl, progress: progress}
	if _, err := p.startNode(ctx, 1); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// startNode starts node i and waits until it serves (ready line and
// /health).
func (p *plProcs) startNode(ctx context.Context, i int) (*launcher.Process, error) {
	pr, err := p.lc.StartNode(ctx, i)
	if err != nil {
		return nil, err
	}
	plLogf(p.progress, "node %d up: pid %d, node id %d, %s", i, pr.Pid(), pr.NodeID(), pr.Spec().GRPCAddr)
	return pr, nil
}

// running lists the indexes of the nodes with a live process.
func (p *plProcs) running() []int {
	var out []int
	for i := 1; i <= p.lc.Config().Nodes; i++ {
		if p.lc.Running(i) {
			out = append(out, i)
		}
	}
	return out
}

// httpAddr is node i's HTTP address.
func (p *plProcs) httpAddr(i int) string { return p.lc.Config().Node(i).HTTPAddr }

// close closes the client and stops every process this cluster started
// (SIGTERM to each pid, SIGKILL after the stop timeout).
func (p *plProcs) close() {
	p.cl.Close()
	if err := p.lc.Stop(); err != nil {
		plLogf(p.progress, "stopping nodes: %v", err)
	}
}

// plScrape reads the named metrics from a node's /metrics; missing ones
// are 0. A name may carry a label filter after a '{': "m{op=\"get\"" sums
// the samples of m whose labels contain op="get"; a plain name sums every
// sample of the metric (labelled or not).
func plScrape(ctx context.Context, httpAddr string, names ...string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := make(map[string]float64, len(names))
	for _, n := range names {
		out[n] = 0
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		series, labels := line[:i], ""
		if j := strings.IndexByte(series, '{'); j >= 0 {
			series, labels = series[:j], series[j:]
		}
		for _, n := range names {
			metric, filter, _ := strings.Cut(n, "{")
			if metric != series || !plLabelsMatch(labels, filter) {
				continue
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(line[i+1:]), 64); err == nil {
				out[n] += f
			}
		}
	}
	return out, sc.Err()
}

// plLabelsMatch reports whether every comma-separated label pair of filter
// occurs in labels.
func plLabelsMatch(labels, filter string) bool {
	for _, f := range strings.Split(filter, ",") {
		if f != "" && !strings.Contains(labels, f) {
			return false
		}
	}
	return true
}

// plLoadAvg returns the machine's 1-minute load average ("?" if unknown).
func plLoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// Snapshot byte counters of the nodes.
const (
	plSentBytes = "tidekv_snapshot_sent_bytes_total"
	plRecvBytes = "tidekv_snapshot_received_bytes_total"
)

// snapshotBytes returns every running node's sent and received snapshot
// bytes, by node index.
func (p *plProcs) snapshotBytes(ctx context.Context) (sent, recv map[int]float64) {
	sent, recv = map[int]float64{}, map[int]float64{}
	for _, i := range p.running() {
		m, err := plScrape(ctx, p.httpAddr(i), plSentBytes, plRecvBytes)
		if err != nil {
			continue
		}
		sent[i], recv[i] = m[plSentBytes], m[plRecvBytes]
	}
	return sent, recv
}

// plSettings applies cluster settings, retrying while the cluster (its
// meta range) is still starting.
func plSettings(ctx context.Context, cl *client.Client, set map[string]string) error {
	var err error
	for range 50 {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = cl.Settings(cctx, set)
		cancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, client.ErrInvalidArgument) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// plStore adapts the client to bench.Store, reading in mode read, and
// counts successful and failed operations for throughput windows.
type plStore struct {
	c        *client.Client
	read     client.ReadOption
	ok, fail atomic.Int64
	first    atomic.Pointer[string] // the first failure's error, for the report
}

func (s *plStore) count(err error) {
	if err != nil {
		if s.fail.Add(1) == 1 {
			msg := err.Error()
			s.first.Store(&msg)
		}
	} else {
		s.ok.Add(1)
	}
}

// firstError is the first failure's error, "" if none.
func (s *plStore) firstError() string {
	if p := s.first.Load(); p != nil {
		return *p
	}
	return ""
}

func (s *plStore) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	v, err := s.c.Get(ctx, key, s.read)
	if errors.Is(err, client.ErrNotFound) {
		s.count(nil)
		return nil, false, nil
	}
	if ctx.Err() == nil {
		s.count(err)
	}
	return v, err == nil, err
}

func (s *plStore) Put(ctx context.Context, key, value []byte) error {
	err := s.c.Put(ctx, key, value)
	if ctx.Err() == nil {
		s.count(err)
	}
	return err
}

func (s *plStore) Scan(ctx context.Context, start []byte, limit int) (int, error) {
	kvs, err := s.c.Scan(ctx, start, nil, limit, s.read)
	if ctx.Err() == nil {
		s.count(err)
	}
	return len(kvs), err
}

// plRecords is the YCSB configuration the scenarios load: records of 10
// fields of 100 bytes (1,010-byte values, about 1 KiB with the key).
func plRecords(records int64, seed uint64) bench.Config {
	cfg := bench.DefaultConfig()
	cfg.Workload = "b"
	cfg.RecordCount = records
	cfg.OperationCount = 1 // Run always runs a run phase; keep it trivial
	cfg.Threads = 32
	cfg.LoadThreads = 32
	cfg.Seed = seed
	return cfg
}

// plRecordBytes is one record's key and value bytes (keys average 23 bytes).
const plRecordBytes = 1010 + 23

// plLoad inserts records (the YCSB load phase) and returns its result.
func plLoad(ctx context.Context, cl *client.Client, records int64, seed uint64) (*bench.PhaseResult, error) {
	st := &plStore{c: cl}
	res, err := bench.Run(ctx, plRecords(records, seed), st, nil)
	if err != nil {
		return nil, err
	}
	if res.Load.Errors > 0 {
		return res.Load, fmt.Errorf("load: %d of %d inserts failed, the first with: %s", res.Load.Errors, res.Load.Operations, st.firstError())
	}
	return res.Load, nil
}

// plBackground runs a YCSB run phase (no load) until stopped.
type plBackground struct {
	store  *plStore
	cancel context.CancelFunc
	done   chan struct{}
	res    *bench.Result
	// per-second successful operation counts
	mu     sync.Mutex
	rates  []plRate
	sample chan struct{}
}

type plRate struct {
	at  time.Time
	ops int64 // successful operations in the second before at
}

// plStartBackground starts cfg's run phase against cl (cfg.SkipLoad is
// set; cfg.Duration bounds it as a safety net).
func plStartBackground(ctx context.Context, cl *client.Client, cfg bench.Config, read client.ReadOption) *plBackground {
	cfg.SkipLoad = true
	cfg.OperationCount = 0
	if cfg.Duration == 0 {
		cfg.Duration = time.Hour
	}
	ctx, cancel := context.WithCancel(ctx)
	b := &plBackground{store: &plStore{c: cl, read: read}, cancel: cancel, done: make(chan struct{}), sample: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.res, _ = bench.Run(ctx, cfg, b.store, nil)
	}()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := b.store.ok.Load()
		for {
			select {
			case <-b.done:
				return
			case now := <-t.C:
				cur := b.store.ok.Load()
				b.mu.Lock()
				b.rates = append(b.rates, plRate{at: now, ops: cur - last})
				b.mu.Unlock()
				last = cur
			}
		}
	}()
	return b
}

// window summarises throughput between from and to: mean successful
// operations per second, the lowest one-second rate, the seconds without
// a single successful operation, and failures.
func (b *plBackground) window(from, to time.Time, okFrom, failFrom int64) (mean, min float64, zero int, failed int64) {
	okTo, failTo := b.store.ok.Load(), b.store.fail.Load()
	if d := to.Sub(from).Seconds(); d > 0 {
		mean = float64(okTo-okFrom) / d
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	min = math.Inf(1)
	for _, r := range b.rates {
		if r.at.After(from.Add(time.Second)) && !r.at.After(to) {
			min = math.Min(min, float64(r.ops))
			if r.ops == 0 {
				zero++
			}
		}
	}
	if math.IsInf(min, 1) {
		min = mean
	}
	return mean, min, zero, failTo - failFrom
}

// stop ends the background load and waits for it.
func (b *plBackground) stop() *bench.Result {
	b.cancel()
	<-b.done
	return b.res
}

// plWait calls check every interval until it reports done, ctx ends, or
// limit passes; it returns whether check reported done.
func plWait(ctx context.Context, limit, interval time.Duration, check func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if check() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(interval):
		}
	}
}

// plRanges fetches the range directory with a bounded wait.
func plRanges(ctx context.Context, cl *client.Client) (*tidekvpb.RangesResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cl.Ranges(cctx)
}

// plStatus fetches the cluster status with a bounded wait.
func plStatus(ctx context.Context, cl *client.Client) (*tidekvpb.StatusResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cl.Status(cctx)
}

// plEventCounts counts the cluster's events by kind (and, for operator
// events, by kind/policy) recorded in [from, to], and returns the reasons
// of failed operators.
func plEventCounts(ctx context.Context, cl *client.Client, from, to time.Time) (map[string]int, []string) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	evs, err := cl.Events(cctx, 0)
	out := map[string]int{}
	var failures []string
	if err != nil {
		return out, nil
	}
	for _, e := range evs {
		t := time.Unix(0, e.GetUnixNanos())
		if t.Before(from) || t.After(to) {
			continue
		}
		k := e.GetKind()
		out[k]++
		if policy, _, ok := strings.Cut(plReasonPolicy(e.GetReason()), ":"); ok && policy != "" {
			out[k+"/"+policy]++
		}
		if strings.Contains(k, "failed") {
			failures = append(failures, e.GetSubject()+": "+e.GetReason())
		}
	}
	return out, failures
}

// plReasonPolicy returns the "policy: reason" tail of an operator event's
// reason ("... : balance: node 1 has ..."), or "".
func plReasonPolicy(reason string) string {
	for _, p := range []string{"bootstrap:", "balance:", "replication:", "repair:", "lease-balance:", "size-split:", "load-split:", "adaptive-replicas:", "decommission:", "merge:"} {
		if i := strings.Index(reason, p); i >= 0 {
			return reason[i:]
		}
	}
	return ""
}

// plMeanStd returns the mean and population standard deviation of xs.
func plMeanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)))
}

// plQuantile returns the q-quantile of xs (sorted in place).
func plQuantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// plTable writes a markdown table.
func plTable(w io.Writer, header []string, rows [][]string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(header, " | "))
	seps := make([]string, len(header))
	for i := range seps {
		seps[i] = "---"
		if i > 0 {
			seps[i] = "--:"
		}
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(seps, "|"))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
}

// plMiB formats bytes as MiB.
func plMiB(b float64) string { return fmt.Sprintf("%.1f", b/(1<<20)) }

// plSecs formats a duration in seconds, "–" for a negative one (never).
func plSecs(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", d.Seconds())
}

// plSleep sleeps for d or until ctx ends.
func plSleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// plSetup prepares a process-based scenario: its work directory (cleanup
// removes it unless --dir was given), the tidekv binary, and the seed.
func plSetup(ctx context.Context, opts Options, name string) (dir, bin string, seed uint64, cleanup func(), err error) {
	if dir, cleanup, err = plWorkDir(opts, name); err != nil {
		return "", "", 0, nil, err
	}
	if bin, err = plBinary(ctx, opts, dir); err != nil {
		cleanup()
		return "", "", 0, nil, err
	}
	seed = opts.Seed
	if seed == 0 {
		seed = 1
	}
	return dir, bin, seed, cleanup, nil
}
