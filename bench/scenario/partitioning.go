package scenario

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/bench"
	"github.com/tidekv/tidekv/client"
)

// partitioning measures how full size splits leave ranges: for each Θmax
// (with Θmin = Θmax/4) a fresh one-node cluster is loaded with the same
// YCSB records (hashed keys, so inserts land all over the key space), the
// splits settle, and the ranges' fullness (bytes / Θmax) is reported. A
// range splits at the key halving it once above Θmax, so sizes should lie
// in [Θmax/2, Θmax]; ElasCass reports a mean fullness of 60–80% with a
// standard deviation under 20%.
//
// Fullness is computed twice: from the sizes placement sees (the
// leaseholder's on-disk estimate, Pebble's EstimateDiskUsage, which does
// not see data still in the memtable and does count overwritten versions
// not yet compacted) and from the exact key and value bytes of a scan.
//
// One node suffices: splits are decided by the range's leaseholder and do
// not depend on how many replicas it has. Load splits are switched off
// (split-qps 1e9, load-split-slack 0) so that only size shapes the ranges. Merges stay on, but
// a run is shorter than the merge cooldown (5 min), so ranges only split.
func init() {
	register(Scenario{
		Name:  "partitioning",
		Short: "Size-based partitioning: for several Θmax, load the same data and report range count and fullness (mean, σ)",
		Run:   runPartitioning,
	})
}

type partitioningParams struct {
	sizes   []uint64 // Θmax values
	records int64
	limit   time.Duration // bound on waiting for splits to settle
	settle  time.Duration // range count unchanged this long: settled
	every   time.Duration // pause between fullness samples during the load
	cpus    float64       // each node's CPU size (Options.NodeCPUs)
}

func partitioningDefaults(opts Options) partitioningParams {
	p := partitioningParams{sizes: []uint64{16 << 20, 32 << 20, 64 << 20}, records: 1_100_000, limit: 4 * time.Minute, settle: 15 * time.Second,
		every: 5 * time.Second}
	if opts.Quick {
		p = partitioningParams{sizes: []uint64{2 << 20, 4 << 20}, records: 40_000, limit: 20 * time.Second, settle: 5 * time.Second,
			every: 200 * time.Millisecond}
	}
	if opts.Duration > 0 {
		p.limit = opts.Duration
	}
	p.cpus = opts.NodeCPUs
	return p
}

// partitioningResult is one Θmax's outcome.
type partitioningResult struct {
	maxBytes   uint64
	loadSecs   float64
	settleSecs float64
	settled    bool
	ranges     int
	reported   []float64 // fullness from reported sizes
	exact      []float64 // fullness from scanned bytes
	overExact  int       // ranges above Θmax by exact bytes
	// samples were taken while the data was being loaded.
	samples []fullnessSample
}

// fullnessSample is the ranges as one look during the load found them.
type fullnessSample struct {
	data  uint64    // exact key and value bytes of all ranges
	exact []float64 // each range's fullness by exact bytes
	over  int       // ranges above Θmax by exact bytes
	// changed: ranges that split or merged while the look scanned them.
	// Every range is measured as the look ends: one that split, as its
	// halves.
	changed int
}

func runPartitioning(ctx context.Context, opts Options, out io.Writer) error {
	p := partitioningDefaults(opts)
	log := opts.Progress
	dir, bin, seed, cleanup, err := plSetup(ctx, opts, "partitioning")
	if err != nil {
		return err
	}
	defer cleanup()
	start, load0 := time.Now(), plLoadAvg()
	var results []partitioningResult
	for i, maxBytes := range p.sizes {
		r, err := partitioningRun(ctx, p, bin, filepath.Join(dir, fmt.Sprintf("theta%d", i)), maxBytes, seed, log)
		if err != nil {
			return err
		}
		results = append(results, r)
	}

	fmt.Fprintf(out, "## partitioning\n\n")
	fmt.Fprintf(out, "Machine load average (1 min) at start / end: %s / %s.\n\n", load0, plLoadAvg())
	fmt.Fprintf(out, "%d records of 1,010-byte values (%.0f MiB logical), loaded by 32 threads into a fresh 1-node cluster per Θmax; Θmin = Θmax/4; "+
		"load splits off; settled = no range above Θmax (as reported) and the count unchanged for %v. Quick: %v. Total %.0f s.\n\n",
		p.records, float64(p.records*plRecordBytes)/(1<<20), p.settle, opts.Quick, time.Since(start).Seconds())
	rows := [][]string{}
	for _, r := range results {
		rm, rs := plMeanStd(r.reported)
		em, es := plMeanStd(r.exact)
		settled := plSecs(time.Duration(r.settleSecs * float64(time.Second)))
		if !r.settled {
			settled = "> " + settled + " (not settled)"
		}
		rows = append(rows, []string{plMiB(float64(r.maxBytes)), strconv.Itoa(r.ranges), fmt.Sprintf("%.1f", r.loadSecs), settled,
			fmt.Sprintf("%.0f%% / %.0f%%", 100*rm, 100*rs),
			fmt.Sprintf("%.0f%% / %.0f%%", 100*em, 100*es),
			fmt.Sprintf("%.0f%%–%.0f%%", 100*plQuantile(r.exact, 0), 100*plQuantile(r.exact, 1)),
			strconv.Itoa(r.overExact)})
	}
	plTable(out, []string{"Θmax MiB", "ranges", "load s", "settled after s", "fullness mean / σ (reported size)",
		"fullness mean / σ (exact bytes)", "exact min–max", "ranges > Θmax (exact)"}, rows)
	for _, r := range results {
		em, es := plMeanStd(r.exact)
		ok := em >= 0.6 && em <= 0.8 && es < 0.2
		verdict := "within"
		if !ok {
			verdict = "outside"
		}
		fmt.Fprintf(out, "- Θmax %s MiB: exact fullness %.0f%% ± %.0f%%, %s ElasCass's 60–80%% with σ < 20%%\n", plMiB(float64(r.maxBytes)), 100*em, 100*es, verdict)
	}
	fmt.Fprintln(out)
	partitioningDuringLoad(out, p, results)
	if err := writeFigure(opts, out, "partitioning", "fullness", partitioningChart(results)); err != nil {
		return err
	}
	if err := writeFigure(opts, out, "partitioning", "during-load", partitioningLoadChart(results)); err != nil {
		return err
	}
	return ctx.Err()
}

// partitioningDuringLoad reports the samples taken while the data loaded:
// the ranges must stay bounded all along, not only once settled.
func partitioningDuringLoad(out io.Writer, p partitioningParams, results []partitioningResult) {
	fmt.Fprintf(out, "While loading (exact bytes of every range, one look every %v plus the time a look takes):\n\n", p.every)
	rows := [][]string{}
	for _, r := range results {
		if len(r.samples) == 0 {
			rows = append(rows, []string{plMiB(float64(r.maxBytes)), "0", "–", "–", "–", "–", "–", "–", "–"})
			continue
		}
		lo, hi, sigma, fullest, over, changed := 1e9, 0.0, 0.0, 0.0, 0, 0
		var means []float64
		for _, smp := range r.samples {
			changed += smp.changed
			if len(smp.exact) == 0 {
				continue // no range held data yet
			}
			m, sd := plMeanStd(smp.exact)
			means = append(means, m)
			lo, hi, sigma = min(lo, m), max(hi, m), max(sigma, sd)
			fullest = max(fullest, plQuantile(smp.exact, 1))
			if smp.over > 0 {
				over++
			}
		}
		overall, _ := plMeanStd(means)
		rows = append(rows, []string{plMiB(float64(r.maxBytes)), strconv.Itoa(len(r.samples)),
			fmt.Sprintf("%s–%s", plMiB(float64(r.samples[0].data)), plMiB(float64(r.samples[len(r.samples)-1].data))),
			fmt.Sprintf("%.0f%%", 100*overall), fmt.Sprintf("%.0f%%–%.0f%%", 100*lo, 100*hi), fmt.Sprintf("%.0f%%", 100*sigma),
			fmt.Sprintf("%.1f%%", 100*fullest), strconv.Itoa(over), strconv.Itoa(changed)})
	}
	plTable(out, []string{"Θmax MiB", "samples", "data MiB", "mean fullness over the looks", "each look's mean (lowest–highest)", "largest σ in a look",
		"fullest range ever", "looks with a range > Θmax", "ranges split during a look (measured as their halves)"}, rows)
	fmt.Fprintln(out)
}

// partitioningRun loads a fresh cluster with Θmax maxBytes and measures
// its ranges.
func partitioningRun(ctx context.Context, p partitioningParams, bin, dir string, maxBytes uint64, seed uint64, log io.Writer) (partitioningResult, error) {
	r := partitioningResult{maxBytes: maxBytes}
	pc, err := plStartProcs(ctx, bin, dir, 1, p.cpus, nil, log)
	if err != nil {
		return r, err
	}
	defer pc.close()
	cl := pc.cl
	if err := plSettings(ctx, cl, map[string]string{"range-max-bytes": strconv.FormatUint(maxBytes, 10),
		"range-min-bytes": strconv.FormatUint(maxBytes/4, 10), "split-qps": "1e9", "load-split-slack": "0"}); err != nil {
		return r, fmt.Errorf("settings: %w", err)
	}
	res, samples, err := loadSampling(ctx, cl, p, maxBytes, seed)
	if err != nil {
		return r, err
	}
	r.samples = samples
	r.loadSecs = res.ElapsedSeconds
	loaded := time.Now()
	lastCount, lastChange := -1, time.Now()
	r.settled = plWait(ctx, p.limit, time.Second, func() bool {
		resp, err := plRanges(ctx, cl)
		if err != nil {
			return false
		}
		over := 0
		for _, ri := range resp.GetRanges() {
			if ri.GetBytes() > maxBytes {
				over++
			}
		}
		if n := len(resp.GetRanges()); n != lastCount {
			lastCount, lastChange = n, time.Now()
		}
		return over == 0 && time.Since(lastChange) >= p.settle
	})
	r.settleSecs = lastChange.Sub(loaded).Seconds()
	if !r.settled {
		r.settleSecs = time.Since(loaded).Seconds()
	}
	resp, err := plRanges(ctx, cl)
	if err != nil {
		return r, err
	}
	r.ranges = len(resp.GetRanges())
	for _, ri := range resp.GetRanges() {
		r.reported = append(r.reported, float64(ri.GetBytes())/float64(maxBytes))
	}
	final, err := sampleFullness(ctx, cl, resp, maxBytes)
	if err != nil {
		return r, err
	}
	r.exact, r.overExact = final.exact, final.over
	em, es := plMeanStd(r.exact)
	plLogf(log, "Θmax %s MiB: %d ranges, exact fullness %.0f%% ± %.0f%% (load %.1f s, settled %.1f s after)",
		plMiB(float64(maxBytes)), r.ranges, 100*em, 100*es, r.loadSecs, r.settleSecs)
	return r, nil
}

// loadSampling loads p.records records and, while they load, samples the
// ranges' exact fullness every p.every (each sample scans every range, so
// samples are as far apart as a scan of all the data takes at least).
func loadSampling(ctx context.Context, cl *client.Client, p partitioningParams, maxBytes, seed uint64) (*bench.PhaseResult, []fullnessSample, error) {
	type loaded struct {
		res *bench.PhaseResult
		err error
	}
	done := make(chan loaded, 1)
	go func() {
		res, err := plLoad(ctx, cl, p.records, seed)
		done <- loaded{res, err}
	}()
	var samples []fullnessSample
	for {
		select {
		case l := <-done:
			return l.res, samples, l.err
		case <-time.After(p.every):
		}
		resp, err := plRanges(ctx, cl)
		if err != nil {
			continue // the load goes on; the next sample will tell
		}
		if smp, err := sampleFullness(ctx, cl, resp, maxBytes); err == nil && smp.data > 0 {
			samples = append(samples, smp)
		}
	}
}

// sampleFullness scans every range of resp for its exact key and value
// bytes, and counts each key in the range that holds it once the scan is
// done: a range that split or merged while it was scanned is measured as
// what it became, so every range is judged at every look.
func sampleFullness(ctx context.Context, cl *client.Client, resp *tidekvpb.RangesResponse, maxBytes uint64) (fullnessSample, error) {
	var smp fullnessSample
	type kv struct {
		key []byte
		n   uint64
	}
	var seen []kv
	for _, ri := range resp.GetRanges() {
		err := plSpanBytes(ctx, cl, ri.GetDesc().GetStartKey(), ri.GetDesc().GetEndKey(), func(key []byte, n uint64) {
			seen = append(seen, kv{key, n})
		})
		if err != nil {
			return smp, fmt.Errorf("scanning range %d: %w", ri.GetDesc().GetRangeId(), err)
		}
	}
	after, err := plRanges(ctx, cl)
	if err != nil {
		return smp, err
	}
	now := after.GetRanges()
	slices.SortFunc(now, func(a, b *tidekvpb.RangeInfo) int {
		return bytes.Compare(a.GetDesc().GetStartKey(), b.GetDesc().GetStartKey())
	})
	sizes := make([]uint64, len(now))
	for _, e := range seen {
		// The last range starting at or before the key holds it.
		i, found := slices.BinarySearchFunc(now, e.key, func(ri *tidekvpb.RangeInfo, k []byte) int { return bytes.Compare(ri.GetDesc().GetStartKey(), k) })
		if !found {
			i--
		}
		if i < 0 {
			return smp, fmt.Errorf("no range holds key %q", e.key)
		}
		sizes[i] += e.n
		smp.data += e.n
	}
	unchanged := map[[2]uint64]bool{}
	for _, ri := range now {
		unchanged[[2]uint64{ri.GetDesc().GetRangeId(), ri.GetDesc().GetGeneration()}] = true
	}
	for _, ri := range resp.GetRanges() {
		if !unchanged[[2]uint64{ri.GetDesc().GetRangeId(), ri.GetDesc().GetGeneration()}] {
			smp.changed++
		}
	}
	for _, n := range sizes {
		f := float64(n) / float64(maxBytes)
		smp.exact = append(smp.exact, f)
		if f > 1 {
			smp.over++
		}
	}
	return smp, nil
}

// plSpanBytes scans [start, end) ("" end: to the end of the key space) and
// calls fn with each key and its key and value bytes.
func plSpanBytes(ctx context.Context, cl *client.Client, start, end []byte, fn func(key []byte, n uint64)) error {
	from := append([]byte(nil), start...)
	for range 1 << 20 { // bounded: each round advances past at least one key
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		kvs, err := cl.Scan(cctx, from, end, 5000)
		cancel()
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			fn(kv.Key, uint64(len(kv.Key)+len(kv.Value)))
		}
		if len(kvs) < 5000 {
			return nil
		}
		from = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
	}
	return fmt.Errorf("scan did not finish")
}
