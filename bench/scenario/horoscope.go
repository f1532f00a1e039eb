package scenario

// horoscope: load-aware replica choice when half the nodes are slow.
//
// Four `tidekv server` processes; nodes 1 and 2 are pinned to CPU 0, nodes
// 3 and 4 to CPU 1 (taskset, from their start, so each runs with
// GOMAXPROCS=1). In the stressed half of the run, CPU hogs (shell busy
// loops at niceness 0) are pinned to CPU 1 as well, so nodes 3 and 4 get a
// fraction of a core and wait for it: they are the slow nodes. The client
// (this process) is not pinned.
//
// The key space is split into four ranges; each has three voters, exactly
// one on a slow node, and the leases are spread two on fast nodes and two
// on slow ones:
//
//	range  voters      lease
//	q0     1, 2, 3     1
//	q1     1, 2, 4     2
//	q2     1, 2, 3     3 (slow)
//	q3     1, 2, 4     4 (slow)
//
// so leaseholder-only reads send half of all reads to slow nodes while
// every read has a fast replica to go to. Placement rebalancing is turned
// off (cluster setting rebalance=false) so that the layout holds.
//
// Workloads: YCSB-C-like point reads and short scans (1..20 keys), Zipf
// 0.99 (scrambled) over the key set, closed loop. Modes:
//
//   - load-aware: client.Any() with the client's default scored choice
//     (node load score + measured round trip);
//   - leaseholder: client.Linearizable(), the leaseholder only;
//   - random: ANY reads sent as raw gRPC to a replica of the key's range
//     chosen uniformly at random (the client has no random-choice knob).

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

func init() {
	register(Scenario{
		Name:  "horoscope",
		Short: "read throughput and p99 by replica choice (load-aware, leaseholder, random) with 2 of 4 nodes CPU-starved (processes, taskset)",
		Run:   runHoroscope,
	})
}

const (
	hsPrefix    = "hs/"
	hsValueSize = 1000
	hsZipfS     = 0.99
	hsThreads   = 16
	hsMaxScan   = 20
	// hsHogs busy loops share CPU 1 with the two slow nodes.
	hsHogs = 6
	// hsSlices: each mode's measured time is cut into this many slices,
	// run in turns with the other modes'.
	hsSlices = 4
)

// hsLayout is the target of each of the four ranges: its voters and its
// leaseholder, as 0-based node indexes.
var hsLayout = []struct {
	voters []int
	lease  int
}{
	{[]int{0, 1, 2}, 0},
	{[]int{0, 1, 3}, 1},
	{[]int{0, 1, 2}, 2},
	{[]int{0, 1, 3}, 3},
}

// The replica-choice modes, as the report names them.
const (
	hsLoadAware   = "load-aware (any)"
	hsLeaseholder = "leaseholder (linearizable)"
	hsRandom      = "random replica (any)"
)

// hsSlow reports whether node index i is slow (pinned with the hogs).
func hsSlow(i int) bool { return i >= 2 }

type hsRow struct {
	stressed bool
	workload string
	mode     string
	res      lrResult
	slowPart float64 // share of KV requests the slow nodes served
	leases   string  // leaseholders during the run
}

// hsRange is a range as the random-replica mode routes it.
type hsRange struct {
	start, end []byte
	replicas   []int // node indexes
}

func runHoroscope(ctx context.Context, opts Options, out io.Writer) error {
	_, err := horoscope(ctx, opts, out)
	return err
}

// horoscope runs the scenario, reports it to out, and returns its rows
// for a test to check the claim on.
func horoscope(ctx context.Context, opts Options, out io.Writer) ([]hsRow, error) {
	if runtime.NumCPU() < 2 {
		return nil, fmt.Errorf("horoscope pins nodes to CPUs 0 and 1: needs 2 CPUs, have %d", runtime.NumCPU())
	}
	keys := 20000
	warm := 2 * time.Second
	if opts.Quick {
		keys, warm = 4000, time.Second
	}
	step := lrStep(opts, 8*time.Second, 1600*time.Millisecond)
	dir, cleanup, err := lrWorkDir(opts, "horoscope")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	binary, err := lrBinary(opts, dir)
	if err != nil {
		return nil, err
	}
	lrLogf(opts, "horoscope: starting 4 node processes (1,2 on CPU 0; 3,4 on CPU 1) in %s", dir)
	cl, err := lrStartProcs(ctx, binary, dir, 4, []string{"0", "0", "1", "1"}, opts.NodeCPUs, nil)
	if err != nil {
		return nil, err
	}
	defer cl.Stop()
	for i := range 4 {
		lrLogf(opts, "horoscope: node %d: pid %d, id %d, %s", i+1, cl.Pid(i), cl.ID(i), cl.Addrs()[i])
	}
	ccfg := client.DefaultConfig()
	ccfg.Addrs = cl.Addrs()
	admin, err := client.New(ccfg)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	rangeIDs, err := hsSetUp(ctx, opts, admin, cl, keys)
	if err != nil {
		return nil, err
	}
	ranges, err := hsRoutes(ctx, admin, cl)
	if err != nil {
		return nil, err
	}
	conns := make([]tidekvpb.KVClient, 4)
	for i, a := range cl.Addrs() {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		defer cc.Close()
		conns[i] = tidekvpb.NewKVClient(cc)
	}
	zipf := newLrZipf(keys, hsZipfS, opts.Seed)

	type mode struct {
		name   string
		client bool
		opt    client.ReadOption
	}
	modes := []mode{
		{hsLoadAware, true, client.Any()},
		{hsLeaseholder, true, client.Linearizable()},
		{hsRandom, false, client.Any()},
	}
	var rows []hsRow
	// Hogs run only in the stressed half; whatever happens, they are
	// stopped (by PID) before this function returns.
	var hogs []*lrHog
	stopHogs := func() {
		for _, h := range hogs {
			h.Stop()
		}
		hogs = nil
	}
	defer stopHogs()
	for _, stressed := range []bool{false, true} {
		if stressed {
			for range hsHogs {
				h, err := lrStartHog("1")
				if err != nil {
					stopHogs()
					return nil, err
				}
				hogs = append(hogs, h)
				lrLogf(opts, "horoscope: CPU hog pid %d on CPU 1", h.Pid())
			}
			time.Sleep(2 * time.Second)
		}
		for _, workload := range []string{"get", "scan"} {
			if ctx.Err() != nil {
				stopHogs()
				return nil, ctx.Err()
			}
			// The layout must hold: a starved node can lose a lease.
			if err := hsPlaceLeases(ctx, admin, cl, rangeIDs); err != nil {
				stopHogs()
				return nil, err
			}
			leases := hsLeaseString(ctx, admin, cl, rangeIDs)
			// One client per mode for the whole cell (the random mode
			// needs none), warmed up once.
			clients := make([]*client.Client, len(modes))
			closeClients := func() {
				for _, c := range clients {
					if c != nil {
						c.Close()
					}
				}
			}
			ops := make([]func(context.Context, *rand.Rand) error, len(modes))
			for mi, m := range modes {
				if m.client {
					cfg := client.DefaultConfig()
					cfg.Addrs = cl.Addrs()
					cfg.DefaultRead = m.opt
					c, err := client.New(cfg)
					if err != nil {
						closeClients()
						stopHogs()
						return nil, err
					}
					clients[mi] = c
				}
				c := clients[mi]
				ops[mi] = func(octx context.Context, r *rand.Rand) error {
					key := lrKey(hsPrefix, zipf.Next(r))
					switch {
					case workload == "get" && c != nil:
						_, err := c.Get(octx, key)
						return err
					case workload == "get":
						return hsRandomGet(octx, r, conns, ranges, key)
					case c != nil:
						_, err := c.Scan(octx, key, nil, 1+r.IntN(hsMaxScan))
						return err
					default:
						return hsRandomScan(octx, r, conns, ranges, key, 1+r.IntN(hsMaxScan))
					}
				}
				lrLogf(opts, "horoscope: stressed=%v %s: warming up %s for %v (leases %s)", stressed, workload, m.name, warm, leases)
				lrClosedLoop(ctx, hsThreads, warm, 0, 10*time.Second, opts.Seed, ops[mi])
			}
			// The modes take turns in short slices, so that a change in
			// the machine's background load hits them alike.
			res := make([]lrResult, len(modes))
			slow, all := make([]float64, len(modes)), make([]float64, len(modes))
			slice := step / hsSlices
			lrLogf(opts, "horoscope: stressed=%v %s: %d rounds of %v per mode", stressed, workload, hsSlices, slice)
			for round := range hsSlices {
				for mi := range modes {
					before := hsServed(ctx, cl)
					r := lrClosedLoop(ctx, hsThreads, 0, slice, 10*time.Second, opts.Seed+uint64(round*len(modes)+mi), ops[mi])
					after := hsServed(ctx, cl)
					res[mi].merge(r)
					for i := range 4 {
						d := after[i] - before[i]
						all[mi] += d
						if hsSlow(i) {
							slow[mi] += d
						}
					}
				}
			}
			closeClients()
			for mi, m := range modes {
				res[mi].finish()
				part := 0.0
				if all[mi] > 0 {
					part = slow[mi] / all[mi]
				}
				rows = append(rows, hsRow{stressed: stressed, workload: workload, mode: m.name, res: res[mi], slowPart: part, leases: leases})
			}
		}
		stopHogs()
	}

	fmt.Fprintf(out, "## horoscope: replica choice with two CPU-starved nodes\n\n")
	fmt.Fprintf(out, "4 `tidekv server` processes on 127.0.0.1; nodes 1-2 pinned to CPU 0, nodes 3-4 to CPU 1 (taskset). "+
		"Stressed: %d busy-loop processes (niceness 0) also pinned to CPU 1, so nodes 3-4 are slow. "+
		"4 ranges, each with 3 voters of which exactly one on a slow node; leases on nodes 1, 2, 3, 4 (two slow). "+
		"%d keys of %d B, Zipf %.2f (scrambled), %d closed-loop client threads in this (unpinned) process; "+
		"scans of 1-%d keys. %v measured per row, in %d slices taken in turns with the other modes of the same workload, after %v warm-up. \"slow share\" = share of the KV requests served by nodes 3-4 "+
		"(from their tidekv_requests_total). Random replica = raw gRPC ANY reads to a uniformly chosen replica of the key's range.\n\n",
		hsHogs, keys, hsValueSize, hsZipfS, hsThreads, hsMaxScan, step, hsSlices, warm)
	fmt.Fprintf(out, "| CPU hogs | workload | replica choice | ops/s | p50 ms | p99 ms | p99.9 ms | errors | slow share |\n")
	fmt.Fprintf(out, "|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		hog := "none"
		if r.stressed {
			hog = fmt.Sprintf("%d on CPU 1", hsHogs)
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %d | %.0f%% |\n", hog, r.workload, r.mode,
			lrThousands(r.res.Rate()), lrMs(r.res.Q(0.5)), lrMs(r.res.Q(0.99)), lrMs(r.res.Q(0.999)), r.res.Errors, 100*r.slowPart)
	}
	fmt.Fprintf(out, "\nLoad-aware vs leaseholder-only (target: p99 at least 30%% lower with slow replicas):\n\n")
	fmt.Fprintf(out, "| CPU hogs | workload | p99 load-aware / leaseholder | p99 change | throughput change | vs random: p99 change |\n|---|---|---|---|---|---|\n")
	for _, stressed := range []bool{false, true} {
		for _, w := range []string{"get", "scan"} {
			la, lh, rnd := hsFindRow(rows, stressed, w, hsLoadAware), hsFindRow(rows, stressed, w, hsLeaseholder), hsFindRow(rows, stressed, w, hsRandom)
			if la == nil || lh == nil || rnd == nil {
				continue
			}
			hog := "none"
			if stressed {
				hog = fmt.Sprintf("%d on CPU 1", hsHogs)
			}
			fmt.Fprintf(out, "| %s | %s | %s / %s ms | %s | %s | %s |\n", hog, w, lrMs(la.res.Q(0.99)), lrMs(lh.res.Q(0.99)),
				hsPct(float64(la.res.Q(0.99)), float64(lh.res.Q(0.99))), hsPct(la.res.Rate(), lh.res.Rate()),
				hsPct(float64(la.res.Q(0.99)), float64(rnd.res.Q(0.99))))
		}
	}
	fmt.Fprintf(out, "\nLeases during the runs (range: node): %s.\n\n", rows[len(rows)-1].leases)
	return rows, writeFigure(opts, out, "horoscope", "replica-choice", horoscopeChart(rows))
}

// hsFindRow is the row of mode in the (stressed, workload) case, or nil.
func hsFindRow(rows []hsRow, stressed bool, workload, mode string) *hsRow {
	i := slices.IndexFunc(rows, func(r hsRow) bool { return r.stressed == stressed && r.workload == workload && r.mode == mode })
	if i < 0 {
		return nil
	}
	return &rows[i]
}

// hsPct formats a/b - 1 as a signed percentage.
func hsPct(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.0f%%", 100*(a/b-1))
}

// hsSetUp turns rebalancing off, splits the key space into the four
// ranges of hsLayout, moves their voters and leases, and loads the keys.
// It returns the four ranges' IDs in key order.
func hsSetUp(ctx context.Context, opts Options, admin *client.Client, cl *lrProcs, keys int) ([]uint64, error) {
	if err := lrNoRebalance(ctx, admin); err != nil {
		return nil, err
	}
	if err := lrWaitVoters(ctx, admin, 3, 60*time.Second); err != nil {
		return nil, err
	}
	for q := range hsLayout {
		split := hsSplitKey(q, keys)
		if err := lrRetry(ctx, 30*time.Second, func(ctx context.Context) error {
			_, err := admin.Split(ctx, split)
			return err
		}); err != nil {
			return nil, fmt.Errorf("split at %q: %w", split, err)
		}
	}
	if err := lrWaitVoters(ctx, admin, 3, 60*time.Second); err != nil {
		return nil, err
	}
	descs, err := hsDescs(ctx, admin, keys)
	if err != nil {
		return nil, err
	}
	ids := make([]uint64, len(descs))
	for q, d := range descs {
		ids[q] = d.GetRangeId()
		want := map[uint64]bool{}
		for _, i := range hsLayout[q].voters {
			want[cl.ID(i)] = true
		}
		have := lrVoters(d)
		var add, remove []uint64
		for _, i := range hsLayout[q].voters {
			if id := cl.ID(i); !slices.Contains(have, id) {
				add = append(add, id)
			}
		}
		for _, id := range have {
			if !want[id] {
				remove = append(remove, id)
			}
		}
		for len(add) > 0 || len(remove) > 0 {
			var a, rm uint64
			if len(add) > 0 {
				a, add = add[0], add[1:]
			}
			if len(remove) > 0 {
				rm, remove = remove[0], remove[1:]
			}
			lrLogf(opts, "horoscope: range %d: add a voter on node %d, remove node %d", d.GetRangeId(), a, rm)
			if err := lrRetry(ctx, 60*time.Second, func(ctx context.Context) error {
				_, err := admin.ChangeReplicas(ctx, d.GetRangeId(), a, rm)
				return err
			}); err != nil {
				return nil, fmt.Errorf("range %d: change replicas (+%d -%d): %w", d.GetRangeId(), a, rm, err)
			}
		}
	}
	if err := lrWaitVoters(ctx, admin, 3, 60*time.Second); err != nil {
		return nil, err
	}
	if err := hsPlaceLeases(ctx, admin, cl, ids); err != nil {
		return nil, err
	}
	lrLogf(opts, "horoscope: layout done (leases %s); loading %d keys of %d B", hsLeaseString(ctx, admin, cl, ids), keys, hsValueSize)
	if err := lrLoad(ctx, admin, hsPrefix, keys, hsValueSize, 32); err != nil {
		return nil, err
	}
	// Followers must have applied the load before ANY reads go to them.
	time.Sleep(time.Second)
	return ids, nil
}

// hsSplitKey is where range q of hsLayout starts.
func hsSplitKey(q, keys int) []byte {
	if q == 0 {
		return []byte(hsPrefix)
	}
	return lrKey(hsPrefix, q*keys/len(hsLayout))
}

// hsDescs returns the descriptors of the four ranges, in key order.
func hsDescs(ctx context.Context, admin *client.Client, keys int) ([]*tidekvpb.RangeDescriptor, error) {
	var out []*tidekvpb.RangeDescriptor
	err := lrRetry(ctx, 30*time.Second, func(ctx context.Context) error {
		resp, err := admin.Ranges(ctx)
		if err != nil {
			return err
		}
		out = out[:0]
		for q := range hsLayout {
			k := hsSplitKey(q, keys)
			d := lrRangeOf(resp, k)
			if d == nil || string(d.GetStartKey()) != string(k) {
				return fmt.Errorf("the range starting at %q is not reported yet", k)
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// hsPlaceLeases moves each range's lease to its planned node.
func hsPlaceLeases(ctx context.Context, admin *client.Client, cl *lrProcs, ids []uint64) error {
	for q, id := range ids {
		if err := lrMoveLease(ctx, admin, cl.Addrs(), id, cl.ID(hsLayout[q].lease), 30*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// hsLeaseString lists the ranges' leaseholders as "r3:n1 r4:n2 ...".
func hsLeaseString(ctx context.Context, admin *client.Client, cl *lrProcs, ids []uint64) string {
	leaders := lrLeaders(ctx, admin, cl.Addrs())
	var parts []string
	for _, r := range ids {
		parts = append(parts, fmt.Sprintf("r%d:n%d", r, leaders[r]))
	}
	return strings.Join(parts, " ")
}

// hsRoutes builds the random-replica mode's routing table.
func hsRoutes(ctx context.Context, admin *client.Client, cl *lrProcs) ([]hsRange, error) {
	resp, err := admin.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	var out []hsRange
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		r := hsRange{start: d.GetStartKey(), end: d.GetEndKey()}
		for _, id := range lrVoters(d) {
			if i := cl.Index(id); i >= 0 {
				r.replicas = append(r.replicas, i)
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i].start) < string(out[j].start) })
	return out, nil
}

func hsFind(ranges []hsRange, key []byte) *hsRange {
	i := sort.Search(len(ranges), func(i int) bool { return string(ranges[i].start) > string(key) }) - 1
	if i < 0 || len(ranges[i].replicas) == 0 {
		return nil
	}
	return &ranges[i]
}

func hsRandomGet(ctx context.Context, r *rand.Rand, conns []tidekvpb.KVClient, ranges []hsRange, key []byte) error {
	rg := hsFind(ranges, key)
	if rg == nil {
		return fmt.Errorf("no range for %q", key)
	}
	_, err := conns[rg.replicas[r.IntN(len(rg.replicas))]].Get(ctx, &tidekvpb.GetRequest{Key: key, ReadMode: tidekvpb.ReadMode_ANY})
	return err
}

func hsRandomScan(ctx context.Context, r *rand.Rand, conns []tidekvpb.KVClient, ranges []hsRange, start []byte, limit int) error {
	for range 8 {
		rg := hsFind(ranges, start)
		if rg == nil {
			return fmt.Errorf("no range for %q", start)
		}
		resp, err := conns[rg.replicas[r.IntN(len(rg.replicas))]].Scan(ctx, &tidekvpb.ScanRequest{
			StartKey: start, Limit: uint32(limit), ReadMode: tidekvpb.ReadMode_ANY})
		if err != nil {
			return err
		}
		limit -= len(resp.GetKvs())
		if limit <= 0 || len(resp.GetResumeKey()) == 0 {
			return nil
		}
		start = resp.GetResumeKey()
	}
	return nil
}

// hsServed reads each node's KV request count from its /metrics.
func hsServed(ctx context.Context, cl *lrProcs) []float64 {
	out := make([]float64, 4)
	for i := range 4 {
		if m, err := lrScrape(ctx, cl.HTTPAddr(i)); err == nil {
			out[i] = m["tidekv_requests_total"]
		}
	}
	return out
}
