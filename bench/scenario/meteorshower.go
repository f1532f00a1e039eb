package scenario

// meteorshower: read latency by read mode as the WAN round trip grows.
//
// Three in-process nodes, one per region (region=a, b, c), share a
// transport.Delays table set with SetLocalities(UniformRTT(R)), so Raft and
// closed-timestamp traffic between regions takes R/2 each way. The client
// sits in region a: its Config.Latency adds R/2 each way to nodes outside a.
// The test range's lease is moved to region b, so a linearizable read costs
// one WAN round trip, while a Bounded(θ) or Any read can be served by the
// replica in region a. A modest write load (to the leaseholder, across the
// WAN) runs throughout, and every read checks how stale its answer was:
// it missed a write acknowledged s before the read began, s > 0.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/server"
	"github.com/tidekv/tidekv/internal/transport"
)

func init() {
	register(Scenario{
		Name:  "meteorshower",
		Short: "read p50/p99 by read mode (linearizable, bounded, any) as the WAN RTT grows (3 regions, in-process)",
		Run:   runMeteorShower,
	})
}

// meteorTheta is the bound of the Bounded reads. It must exceed the
// closed-timestamp interval (100 ms) plus the one-way delay from the
// leaseholder (up to 100 ms here) for the local follower to qualify.
const meteorTheta = 500 * time.Millisecond

const (
	meteorPrefix     = "ms/"
	meteorKeys       = 1000
	meteorValueSize  = 100
	meteorReaders    = 16
	meteorWriters    = 8
	meteorWriteRate  = 50.0 // writes/s offered in total
	meteorSettleTime = time.Second
)

// meteorAck is one acknowledged write of a key.
type meteorAck struct {
	seq int64
	at  time.Time
}

// meteorAcks records, per key, the writes acknowledged to the client, in
// order (each key has a single writer goroutine, so sequence numbers and
// acknowledgement times of a key both increase).
type meteorAcks struct {
	mu    sync.Mutex
	byKey [][]meteorAck
}

func (a *meteorAcks) add(k int, seq int64, at time.Time) {
	a.mu.Lock()
	a.byKey[k] = append(a.byKey[k], meteorAck{seq, at})
	a.mu.Unlock()
}

// staleness says how long before began a write newer than the one read
// (seq) had been acknowledged: 0 if none was.
func (a *meteorAcks) staleness(k int, seq int64, began time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.byKey[k]
	i := sort.Search(len(list), func(i int) bool { return list[i].seq > seq })
	if i == len(list) || !list[i].at.Before(began) {
		return 0
	}
	return began.Sub(list[i].at)
}

// meteorSeq parses the sequence number a value starts with ("v<seq>;").
func meteorSeq(v []byte) (int64, bool) {
	s, ok := strings.CutPrefix(string(v), "v")
	if !ok {
		return 0, false
	}
	s, _, _ = strings.Cut(s, ";")
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// meteorPct formats a share as a percentage, with more digits near 0.
func meteorPct(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x < 0.01:
		return fmt.Sprintf("%.2f%%", 100*x)
	default:
		return fmt.Sprintf("%.1f%%", 100*x)
	}
}

// meteorSampleScores averages loads() every 250 ms from warm until
// warm+d; the result arrives on the channel.
func meteorSampleScores(ctx context.Context, loads func(context.Context) [3]float64, warm, d time.Duration) <-chan [3]float64 {
	ch := make(chan [3]float64, 1)
	go func() {
		var sum [3]float64
		n := 0
		start := time.Now()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for ctx.Err() == nil && time.Since(start) < warm+d {
			<-t.C
			if time.Since(start) < warm {
				continue
			}
			l := loads(ctx)
			for i := range sum {
				sum[i] += l[i]
			}
			n++
		}
		if n > 0 {
			for i := range sum {
				sum[i] /= float64(n)
			}
		}
		ch <- sum
	}()
	return ch
}

// meteorRow is one (RTT, mode) measurement.
type meteorRow struct {
	rtt       time.Duration
	mode      string
	res       lrResult
	stale     int           // measured reads that missed an acknowledged write
	maxStale  time.Duration // the largest such miss
	writeRate float64
	leaseNode string     // region of the leaseholder during the step
	remote    float64    // share of the readers' RPCs that went to regions b and c
	scores    [3]float64 // mean load score of the nodes in a, b, c during the run
}

func runMeteorShower(ctx context.Context, opts Options, out io.Writer) error {
	rtts := []time.Duration{0, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	if opts.Quick {
		rtts = []time.Duration{0, 100 * time.Millisecond}
	}
	step := lrStep(opts, 5*time.Second, time.Second)
	warm := time.Second
	if opts.Quick {
		warm = 500 * time.Millisecond
	}
	dir, cleanup, err := lrWorkDir(opts, "meteorshower")
	if err != nil {
		return err
	}
	defer cleanup()
	defer lrRedirectLog(dir)()

	regions := []string{"region=a", "region=b", "region=c"}
	delays := &transport.Delays{}
	lrLogf(opts, "meteorshower: starting 3 in-process nodes (%s) in %s", strings.Join(regions, ", "), dir)
	cl, err := lrStartInProc(ctx, dir, 3, func(i int, c *server.Config) {
		c.Locality = regions[i]
		c.Transport.Delays = delays
	})
	if err != nil {
		return err
	}
	defer cl.Stop()
	localities := map[uint64]string{}
	addrRegion := map[string]string{}
	regionNode := map[string]uint64{}
	nodeRegion := map[uint64]string{}
	for i, s := range cl.Nodes {
		localities[s.NodeID()] = regions[i]
		addrRegion[s.Addr()] = regions[i]
		regionNode[regions[i]] = s.NodeID()
		nodeRegion[s.NodeID()] = strings.TrimPrefix(regions[i], "region=")
	}
	var oneWay atomic.Int64 // client ↔ other regions, one way
	// The readers' client counts its RPCs by region: Latency is called
	// once per RPC.
	var localRPCs, remoteRPCs atomic.Int64
	newClient := func(count bool) (*client.Client, error) {
		cfg := client.DefaultConfig()
		cfg.Addrs = cl.Addrs()
		cfg.Latency = func(addr string) time.Duration {
			if addrRegion[addr] == "region=a" {
				if count {
					localRPCs.Add(1)
				}
				return 0
			}
			if count {
				remoteRPCs.Add(1)
			}
			return time.Duration(oneWay.Load())
		}
		return client.New(cfg)
	}
	admin, err := newClient(false)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := lrWaitVoters(ctx, admin, 3, 60*time.Second); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	split, err := admin.Split(sctx, []byte(meteorPrefix))
	cancel()
	if err != nil {
		return fmt.Errorf("split at %q: %w", meteorPrefix, err)
	}
	rangeID := split.GetRight().GetRangeId()
	if err := lrWaitVoters(ctx, admin, 3, 60*time.Second); err != nil {
		return err
	}
	leaseNode := regionNode["region=b"]
	if err := lrMoveLease(ctx, admin, cl.Addrs(), rangeID, leaseNode, 30*time.Second); err != nil {
		return err
	}
	lrLogf(opts, "meteorshower: range %d's lease is on node %d (region b); loading %d keys", rangeID, leaseNode, meteorKeys)
	// Node scores as node a knows them (every node's), for the report.
	cc, err := grpc.NewClient(cl.Nodes[0].Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	loads := func(ctx context.Context) [3]float64 {
		var out [3]float64
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := tidekvpb.NewAdminClient(cc).NodeLoads(lctx, &tidekvpb.NodeLoadsRequest{})
		if err != nil {
			return out
		}
		for _, l := range resp.GetLoads() {
			for i, s := range cl.Nodes {
				if s.NodeID() == l.GetNodeId() {
					out[i] = l.GetScore()
				}
			}
		}
		return out
	}
	acks := &meteorAcks{byKey: make([][]meteorAck, meteorKeys)}
	if err := lrLoad(ctx, admin, meteorPrefix, meteorKeys, meteorValueSize, 16); err != nil {
		return err
	}
	loaded := time.Now()
	for k := range meteorKeys {
		acks.add(k, 0, loaded)
	}

	var seq atomic.Int64
	modes := []struct {
		name string
		opt  client.ReadOption
	}{
		{"linearizable", client.Linearizable()},
		{fmt.Sprintf("bounded(%v)", meteorTheta), client.Bounded(meteorTheta)},
		{"any", client.Any()},
	}
	var rows []meteorRow
	for si, R := range rtts {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delays.SetLocalities(localities, transport.UniformRTT(R))
		oneWay.Store(int64(R / 2))
		// The lease must still be in region b (an election under new
		// delays could have moved it).
		if err := lrMoveLease(ctx, admin, cl.Addrs(), rangeID, leaseNode, 30*time.Second); err != nil {
			return err
		}
		time.Sleep(meteorSettleTime)
		c, err := newClient(true) // readers
		if err != nil {
			return err
		}
		wc, err := newClient(false) // writers
		if err != nil {
			c.Close()
			return err
		}
		// Writers: key k belongs to writer k%meteorWriters, so each key's
		// writes are sequential.
		wctx, stopWriters := context.WithCancel(ctx)
		var writes atomic.Int64
		var wg sync.WaitGroup
		for w := range meteorWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(opts.Seed, uint64(1000+si*100+w)))
				interval := time.Duration(float64(time.Second) * meteorWriters / meteorWriteRate)
				next := time.Now()
				for wctx.Err() == nil {
					k := w + meteorWriters*r.IntN(meteorKeys/meteorWriters)
					n := seq.Add(1)
					pctx, cancel := context.WithTimeout(wctx, 5*time.Second)
					err := wc.Put(pctx, lrKey(meteorPrefix, k), lrValue(fmt.Sprintf("v%d;", n), meteorValueSize))
					cancel()
					if err == nil {
						acks.add(k, n, time.Now())
						writes.Add(1)
					}
					next = next.Add(interval)
					if d := time.Until(next); d > 0 {
						select {
						case <-time.After(d):
						case <-wctx.Done():
						}
					} else {
						next = time.Now()
					}
				}
			}()
		}
		wStart := time.Now()
		for mi, m := range modes {
			lrLogf(opts, "meteorshower: RTT %v, %s reads for %v", R, m.name, step)
			measureFrom := time.Now().Add(warm)
			var local0, remote0 atomic.Int64
			local0.Store(localRPCs.Load())
			remote0.Store(remoteRPCs.Load())
			snap := time.AfterFunc(warm, func() { local0.Store(localRPCs.Load()); remote0.Store(remoteRPCs.Load()) })
			scores := meteorSampleScores(ctx, loads, warm, step)
			var staleMu sync.Mutex
			stale, maxStale := 0, time.Duration(0)
			res := lrClosedLoop(ctx, meteorReaders, warm, step, 10*time.Second, opts.Seed+uint64(si*10+mi), func(octx context.Context, r *rand.Rand) error {
				k := r.IntN(meteorKeys)
				began := time.Now()
				v, err := c.Get(octx, lrKey(meteorPrefix, k), m.opt)
				if err != nil {
					return err
				}
				n, ok := meteorSeq(v)
				if !ok {
					return fmt.Errorf("unexpected value %q", v)
				}
				if s := acks.staleness(k, n, began); s > 0 && !began.Before(measureFrom) {
					staleMu.Lock()
					stale++
					maxStale = max(maxStale, s)
					staleMu.Unlock()
				}
				return nil
			})
			snap.Stop()
			local, remote := localRPCs.Load()-local0.Load(), remoteRPCs.Load()-remote0.Load()
			share := 0.0
			if local+remote > 0 {
				share = float64(remote) / float64(local+remote)
			}
			rows = append(rows, meteorRow{rtt: R, mode: m.name, res: res, stale: stale, maxStale: maxStale, remote: share, scores: <-scores})
		}
		stopWriters()
		wg.Wait()
		wc.Close()
		wRate := float64(writes.Load()) / time.Since(wStart).Seconds()
		leader := nodeRegion[lrLeaders(ctx, admin, cl.Addrs())[rangeID]]
		for i := len(rows) - len(modes); i < len(rows); i++ {
			rows[i].writeRate = wRate
			rows[i].leaseNode = leader
		}
		c.Close()
	}

	fmt.Fprintf(out, "## meteorshower: read latency by mode as the WAN round trip grows\n\n")
	fmt.Fprintf(out, "3 in-process nodes in regions a, b, c (one each, RTT R between regions); client in region a "+
		"(R to b and c); the range's lease in region b. %d reader threads (closed loop, uniform over %d keys of %d B), "+
		"%d writer goroutines offering %.0f writes/s to the same keys. %v measured per cell after %v warm-up. "+
		"Bounded reads use θ = %v. \"stale\" = reads that missed a write acknowledged before they began; "+
		"\"max stale\" = how long before the read the newest missed write had been acknowledged. "+
		"\"reads to b, c\" = share of the reader client's RPCs sent out of region a (reads and its load polls). "+
		"Scores = mean load score of each node (docs/monitor.md; lower is better) as node a reported them every 250 ms during the run; "+
		"all three nodes share this machine, so their CPU terms all measure the same two cores.\n\n",
		meteorReaders, meteorKeys, meteorValueSize, meteorWriters, meteorWriteRate, step, warm, meteorTheta)
	fmt.Fprintf(out, "| RTT ms | mode | p50 ms | p99 ms | reads/s | errors | stale reads | max stale ms | writes/s | lease in | reads to b, c | scores a / b / c |\n")
	fmt.Fprintf(out, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		stale := "0"
		if r.res.Ops > 0 && r.stale > 0 {
			stale = fmt.Sprintf("%d (%.1f%%)", r.stale, 100*float64(r.stale)/float64(r.res.Ops))
		}
		fmt.Fprintf(out, "| %d | %s | %s | %s | %s | %d | %s | %s | %.0f | %s | %s | %.1f / %.1f / %.1f |\n",
			r.rtt.Milliseconds(), r.mode, lrMs(r.res.Q(0.5)), lrMs(r.res.Q(0.99)), lrThousands(r.res.Rate()),
			r.res.Errors, stale, lrMs(r.maxStale), r.writeRate, r.leaseNode, meteorPct(r.remote), r.scores[0], r.scores[1], r.scores[2])
	}
	// Compact view: p50/p99 per mode (columns) per RTT (rows).
	fmt.Fprintf(out, "\np50 / p99 ms:\n\n| RTT ms |")
	for _, m := range modes {
		fmt.Fprintf(out, " %s |", m.name)
	}
	fmt.Fprintf(out, "\n|---|%s\n", strings.Repeat("---|", len(modes)))
	for _, R := range rtts {
		fmt.Fprintf(out, "| %d |", R.Milliseconds())
		for _, m := range modes {
			i := slices.IndexFunc(rows, func(r meteorRow) bool { return r.rtt == R && r.mode == m.name })
			if i >= 0 {
				fmt.Fprintf(out, " %s / %s |", lrMs(rows[i].res.Q(0.5)), lrMs(rows[i].res.Q(0.99)))
			}
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
	return writeFigure(opts, out, "meteorshower", "latency-rtt", meteorChart(rows))
}
