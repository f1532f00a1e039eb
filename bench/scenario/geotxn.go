package scenario

// geotxn: the bank workload, baseline transactions vs geo commit, as the
// WAN round trip grows (docs/transactions.md, "Geo mode"; issue 15 item 4).
//
// Three in-process nodes, one per region (region=a, b, c), share a
// transport.Delays table set with SetLocalities(UniformRTT(R)); Raft,
// closed-timestamp and geo epoch traffic between regions all take R/2 each
// way. There is one client per region: its RPCs to nodes of other regions
// wait R/2 each way (client Config.Latency), to its own region's node none.
//
// Baseline: bench.RunTxn's bank workload (client.Txn: intents, records,
// two-phase or one-phase commit over Raft ranges), its transactions spread
// over the three clients, the invariant checked during and after the run.
// Geo: the same number of workers, a third per region, each sending
// transfers (a debit with a floor of 0 and a credit) to its region's
// gateway; the invariant (the total, no account below 0, every DC the same
// accounts) is checked at the end. Both at low contention (many accounts)
// and skewed (a handful).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/bench"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/server"
	"github.com/tidekv/tidekv/internal/transport"
	"github.com/tidekv/tidekv/plot"
)

func init() {
	register(Scenario{
		Name:  "geotxn",
		Short: "bank transfers: baseline transactions vs geo commit at 0, 50 and 100 ms WAN RTT, low contention and skewed (3 regions, in-process)",
		Run:   runGeoTxn,
	})
}

const (
	geoKeySpace    = "geotxn"
	geoBalance     = 1000
	geoMaxAmount   = 10 // as bench txn's bank
	geoWorkers     = 12
	geoEpoch       = 10 * time.Millisecond
	geoSkewed      = 8 // accounts of the skewed case
	geoTxnTimeout  = 30 * time.Second
	geoConvergeFor = 10 * time.Second
)

// geoRow is one (RTT, workload, protocol) measurement; its JSON names are
// the --json report.
type geoRow struct {
	RTTMs           float64 `json:"rtt_ms"`
	Workload        string  `json:"workload"`
	Accounts        int     `json:"accounts"`
	Protocol        string  `json:"protocol"`
	Committed       int64   `json:"committed"`
	Aborted         int64   `json:"aborted"`
	Errors          int64   `json:"errors"`
	CommittedPerSec float64 `json:"committed_per_sec"`
	AbortRate       float64 `json:"abort_rate"`
	P50Ms           float64 `json:"p50_ms"`
	P99Ms           float64 `json:"p99_ms"`
	InvariantOK     bool    `json:"invariant_ok"`
	Note            string  `json:"note,omitempty"`
}

// geoCluster is the scenario's cluster and its clients, one per region.
type geoCluster struct {
	cl      *lrInProc
	clients []*client.Client
	delays  *transport.Delays
	locs    map[uint64]string
	oneWay  atomic.Int64 // client ↔ other regions
}

func runGeoTxn(ctx context.Context, opts Options, out io.Writer) error {
	rtts := []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond}
	step := lrStep(opts, 10*time.Second, 3*time.Second)
	many := 1000
	if opts.Quick {
		many = 300
	}
	dir, cleanup, err := lrWorkDir(opts, "geotxn")
	if err != nil {
		return err
	}
	defer cleanup()
	defer lrRedirectLog(dir)()
	gc, err := startGeoCluster(ctx, opts, dir)
	if err != nil {
		return err
	}
	defer gc.stop()
	var rows []geoRow
	for _, rtt := range rtts {
		gc.delays.SetLocalities(gc.locs, transport.UniformRTT(rtt))
		gc.oneWay.Store(int64(rtt / 2))
		time.Sleep(time.Second) // leases and closed timestamps settle
		for _, wl := range []struct {
			name     string
			accounts int
		}{{"low contention", many}, {"skewed", geoSkewed}} {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			lrLogf(opts, "geotxn: RTT %v, %s (%d accounts): baseline", rtt, wl.name, wl.accounts)
			base, err := gc.runBaseline(ctx, opts, wl.accounts, step)
			if err != nil {
				return err
			}
			lrLogf(opts, "geotxn: RTT %v, %s: geo commit", rtt, wl.name)
			g, err := gc.runGeo(ctx, opts, len(rows), wl.accounts, step)
			if err != nil {
				return err
			}
			for _, r := range []*geoRow{&base, &g} {
				r.RTTMs, r.Workload, r.Accounts = ms(rtt), wl.name, wl.accounts
				rows = append(rows, *r)
			}
		}
	}
	return writeGeoReport(opts, out, rows, step)
}

func startGeoCluster(ctx context.Context, opts Options, dir string) (*geoCluster, error) {
	regions := []string{"region=a", "region=b", "region=c"}
	gc := &geoCluster{delays: &transport.Delays{}, locs: map[uint64]string{}}
	lrLogf(opts, "geotxn: starting 3 in-process nodes in %s", dir)
	cl, err := lrStartInProc(ctx, dir, 3, func(i int, c *server.Config) {
		c.Locality = regions[i]
		c.Transport.Delays = gc.delays
		c.Geo.KeySpace = geoKeySpace
		c.Geo.Localities = regions
		c.Geo.Protocol.Epoch = geoEpoch
	})
	if err != nil {
		return nil, err
	}
	gc.cl = cl
	for i, s := range cl.Nodes {
		gc.locs[s.NodeID()] = regions[i]
		cfg := client.DefaultConfig()
		// Its own region's node first: the geo gateway it sends to.
		cfg.Addrs = append([]string{s.Addr()}, slices.DeleteFunc(cl.Addrs(), func(a string) bool { return a == s.Addr() })...)
		cfg.Latency = func(addr string) time.Duration {
			if addr == s.Addr() {
				return 0
			}
			return time.Duration(gc.oneWay.Load())
		}
		c, err := client.New(cfg)
		if err != nil {
			gc.stop()
			return nil, err
		}
		gc.clients = append(gc.clients, c)
	}
	if err := lrWaitVoters(ctx, gc.clients[0], 3, 60*time.Second); err != nil {
		gc.stop()
		return nil, err
	}
	for _, c := range gc.clients {
		if err := lrRetry(ctx, 30*time.Second, func(ctx context.Context) error {
			_, _, err := c.GeoScan(ctx, geoKeySpace, nil, []byte{0})
			return err
		}); err != nil {
			gc.stop()
			return nil, fmt.Errorf("geo gateways not up: %w", err)
		}
	}
	return gc, nil
}

func (gc *geoCluster) stop() {
	for _, c := range gc.clients {
		c.Close()
	}
	if gc.cl != nil {
		gc.cl.Stop()
	}
}

// runBaseline runs bench txn's bank workload for step.
func (gc *geoCluster) runBaseline(ctx context.Context, opts Options, accounts int, step time.Duration) (geoRow, error) {
	cfg := bench.DefaultTxnBenchConfig()
	cfg.Accounts, cfg.InitialBalance = accounts, geoBalance
	cfg.Ranges = min(3, accounts)
	cfg.Workers = geoWorkers
	cfg.Duration = step
	cfg.CheckInterval = max(step/3, time.Second)
	cfg.Seed = opts.Seed
	res, err := bench.RunTxn(ctx, cfg, bench.ClientTxnStore(gc.clients...), io.Discard)
	if err != nil {
		return geoRow{}, fmt.Errorf("baseline run: %w", err)
	}
	row := geoRow{Protocol: "baseline", Committed: res.Committed, Aborted: res.Aborted, Errors: res.Errors,
		CommittedPerSec: res.CommittedPerSec, P50Ms: res.P50Ms, P99Ms: res.P99Ms, InvariantOK: res.InvariantOK,
		Note: res.InvariantError}
	// An attempt that conflicted is an abort, whether the client then
	// retried it (Retries) or gave up (Aborted).
	attempts := res.Committed + res.Aborted + res.Retries
	row.AbortRate = share(float64(res.Aborted+res.Retries), float64(attempts)) / 100
	return row, nil
}

// geoAcct is account i of step k (each step opens its own accounts).
func geoAcct(k, i int) []byte { return fmt.Appendf(nil, "s%02d/acct/%06d", k, i) }

// runGeo opens accounts for step k, runs transfers through the gateways
// for step and checks the invariant at every DC.
func (gc *geoCluster) runGeo(ctx context.Context, opts Options, k, accounts int, step time.Duration) (geoRow, error) {
	for lo := 0; lo < accounts; lo += 64 {
		var ops []*tidekvpb.GeoOp
		for i := lo; i < min(lo+64, accounts); i++ {
			ops = append(ops, client.GeoPut(geoAcct(k, i), strconv.AppendInt(nil, geoBalance, 10)))
		}
		tctx, cancel := context.WithTimeout(ctx, geoTxnTimeout)
		r, err := gc.clients[0].GeoCommit(tctx, geoKeySpace, ops...)
		cancel()
		if err != nil || !r.Committed {
			return geoRow{}, fmt.Errorf("opening geo accounts: %v %s", err, r.Reason)
		}
	}
	var mu sync.Mutex
	var res lrResult
	row := geoRow{Protocol: "geo"}
	var wg sync.WaitGroup
	start := time.Now()
	for w := range geoWorkers {
		c := gc.clients[w%len(gc.clients)]
		rng := rand.New(rand.NewPCG(opts.Seed, uint64(w)))
		wg.Go(func() {
			var mine lrResult
			var committed, aborted, errs int64
			for time.Since(start) < step && ctx.Err() == nil {
				from, to := rng.IntN(accounts), rng.IntN(accounts-1)
				if to >= from {
					to++
				}
				amount := 1 + rng.Int64N(geoMaxAmount)
				t0 := time.Now()
				tctx, cancel := context.WithTimeout(ctx, geoTxnTimeout)
				r, err := c.GeoCommit(tctx, geoKeySpace, client.GeoDebit(geoAcct(k, from), amount, 0), client.GeoAdd(geoAcct(k, to), amount))
				cancel()
				switch {
				case err == nil && r.Committed:
					committed++
					mine.Lat = append(mine.Lat, time.Since(t0))
				case err == nil, errors.Is(err, client.ErrTxnRetry):
					aborted++
				default:
					errs++
				}
			}
			mu.Lock()
			res.merge(mine)
			row.Committed += committed
			row.Aborted += aborted
			row.Errors += errs
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	res.finish()
	row.CommittedPerSec = float64(row.Committed) / elapsed.Seconds()
	row.AbortRate = share(float64(row.Aborted), float64(row.Committed+row.Aborted)) / 100
	row.P50Ms, row.P99Ms = ms(res.Q(0.5)), ms(res.Q(0.99))
	if err := gc.checkGeo(ctx, k, accounts); err != nil {
		row.Note = err.Error()
	} else {
		row.InvariantOK = true
	}
	return row, nil
}

// checkGeo waits until every DC holds the same accounts of step k, which
// add up to what was opened, none below 0.
func (gc *geoCluster) checkGeo(ctx context.Context, k, accounts int) error {
	var last error
	for deadline := time.Now().Add(geoConvergeFor); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var first string
		last = nil
		for i, c := range gc.clients {
			kvs, _, err := c.GeoScan(ctx, geoKeySpace, geoAcct(k, 0), geoAcct(k, accounts))
			if err != nil {
				return err
			}
			total, state := int64(0), ""
			for _, kv := range kvs {
				n, err := strconv.ParseInt(string(kv.GetValue()), 10, 64)
				if err != nil || n < 0 {
					return fmt.Errorf("DC %d: %s holds %q", i, kv.GetKey(), kv.GetValue())
				}
				total += n
				state += string(kv.GetValue()) + ","
			}
			if want := int64(accounts) * geoBalance; total != want || len(kvs) != accounts {
				return fmt.Errorf("DC %d: %d accounts hold %d, want %d accounts holding %d", i, len(kvs), total, accounts, want)
			}
			if i == 0 {
				first = state
			} else if state != first {
				last = fmt.Errorf("DC %d's accounts differ from DC 0's", i)
			}
		}
		if last == nil {
			return nil
		}
	}
	return last
}

// writeGeoReport writes the table (or JSON), the figure and the
// comparison with Catenae's targets at the largest RTT.
func writeGeoReport(opts Options, out io.Writer, rows []geoRow, step time.Duration) error {
	if opts.JSON {
		if err := writeFigure(opts, io.Discard, "geotxn", "bank", geoChart(rows)); err != nil {
			return err
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			StepS   float64  `json:"step_s"`
			Workers int      `json:"workers"`
			EpochMs float64  `json:"epoch_ms"`
			Rows    []geoRow `json:"rows"`
		}{step.Seconds(), geoWorkers, ms(geoEpoch), rows})
	}
	fmt.Fprintf(out, "geotxn: %d workers, %v a step, epoch %v\n\n", geoWorkers, step, geoEpoch)
	fmt.Fprintln(out, "| RTT ms | workload | accounts | protocol | committed/s | abort rate | p50 ms | p99 ms | errors | invariant |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		inv := "ok"
		if !r.InvariantOK {
			inv = "BROKEN: " + r.Note
		}
		fmt.Fprintf(out, "| %.0f | %s | %d | %s | %.1f | %s | %.1f | %.1f | %d | %s |\n", r.RTTMs, r.Workload, r.Accounts,
			r.Protocol, r.CommittedPerSec, meteorPct(r.AbortRate), r.P50Ms, r.P99Ms, r.Errors, inv)
	}
	fmt.Fprintln(out)
	for i := 0; i+1 < len(rows); i += 2 {
		if b, g := rows[i], rows[i+1]; b.RTTMs == rows[len(rows)-1].RTTMs && b.CommittedPerSec > 0 && b.P50Ms > 0 {
			fmt.Fprintf(out, "At %.0f ms, %s: geo commit %.2f× the baseline's throughput, %.2f× its p50 commit latency (Catenae's targets: ≥ 2×, ≤ 0.5×).\n\n",
				b.RTTMs, b.Workload, g.CommittedPerSec/b.CommittedPerSec, g.P50Ms/b.P50Ms)
		}
	}
	return writeFigure(opts, out, "geotxn", "bank", geoChart(rows))
}

// geoChart is throughput and p50 commit latency against the RTT, a panel
// per (metric, workload) so that the skewed baseline's seconds do not
// flatten the rest, one line per protocol.
func geoChart(rows []geoRow) plot.Chart {
	var workloads []string
	for _, r := range rows {
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
	}
	var panels []plot.Panel
	for _, metric := range []string{"committed/s", "p50 ms"} {
		for _, wl := range workloads {
			p := plot.Panel{YLabel: metric + ", " + wl}
			for _, proto := range []string{"baseline", "geo"} {
				sr := plot.Series{Name: proto}
				for _, r := range rows {
					if r.Workload == wl && r.Protocol == proto {
						y := r.CommittedPerSec
						if metric == "p50 ms" {
							y = r.P50Ms
						}
						sr.Points = append(sr.Points, plot.Point{X: r.RTTMs, Y: y})
					}
				}
				p.Series = append(p.Series, sr)
			}
			panels = append(panels, p)
		}
	}
	return plot.Chart{Title: "geotxn: bank transfers, baseline vs geo commit, against the RTT between regions",
		XLabel: "RTT ms", Panels: panels}
}
