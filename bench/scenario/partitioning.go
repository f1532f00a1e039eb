package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/bench"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/placement"
)

// partitioning measures how full size splits leave ranges: for each Θmax
// (with Θmin = Θmax/4) a fresh one-node cluster is loaded with the same
// YCSB records (hashed keys, so inserts land all over the key space), the
// splits settle, and the ranges' fullness (bytes / Θmax) is reported. A
// range splits at the key halving it once above the split line
// (range-split-fill × Θmax), so sizes should lie in [line/2, line];
// ElasCass reports a mean fullness of 60–80% with a standard deviation
// under 20% (§5.4, Fig. 8(c)).
//
// Hashed inserts grow every range in proportion to its size, so ranges
// that start equal stay equal: from one range, every range splits in the
// same wave and the fullness at the end of the load is the phase of that
// sawtooth, data / (Θmax × 2^k), set by the data size alone. The report
// gives that in-step value beside the measured one, and the mean over the
// load weighted by time, which does not hang on where the load stops.
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
	if opts.Records > 0 {
		p.records = opts.Records
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
	data       uint64    // exact key and value bytes at the end
	// samples were taken while the data was being loaded.
	samples []fullnessSample
}

// fullnessSample is the ranges as one look during the load found them.
type fullnessSample struct {
	at    float64   // seconds since the load began, as the look ended
	data  uint64    // exact key and value bytes of all ranges
	exact []float64 // each range's fullness by exact bytes
	over  int       // ranges above Θmax by exact bytes
	// changed: ranges that split or merged while the look scanned them.
	// Every range is measured as the look ends: one that split, as its
	// halves.
	changed int
}

func runPartitioning(ctx context.Context, opts Options, out io.Writer) error {
	m, err := measurePartitioning(ctx, opts)
	if err != nil {
		return err
	}
	if err := m.report(opts, out); err != nil {
		return err
	}
	return ctx.Err()
}

// partitioningMeasured is a whole run: every Θmax's outcome and the
// machine's load around it.
type partitioningMeasured struct {
	p            partitioningParams
	quick        bool
	fill         float64 // the split line as a share of Θmax
	results      []partitioningResult
	load0, load1 string
	secs         float64
}

func measurePartitioning(ctx context.Context, opts Options) (partitioningMeasured, error) {
	m := partitioningMeasured{p: partitioningDefaults(opts), quick: opts.Quick,
		// The nodes run with the default split line; the scenario sets
		// only Θmax, Θmin and the load-split settings.
		fill: placement.DefaultConfig().SplitFill}
	dir, bin, seed, cleanup, err := plSetup(ctx, opts, "partitioning")
	if err != nil {
		return m, err
	}
	defer cleanup()
	start := time.Now()
	m.load0 = plLoadAvg()
	for i, maxBytes := range m.p.sizes {
		r, err := partitioningRun(ctx, m.p, bin, filepath.Join(dir, fmt.Sprintf("theta%d", i)), maxBytes, seed, opts.Progress)
		if err != nil {
			return m, err
		}
		m.results = append(m.results, r)
	}
	m.load1, m.secs = plLoadAvg(), time.Since(start).Seconds()
	return m, nil
}

// partitioningClaims is what the report claims of one Θmax, computed once
// so that the report and the scenario's test judge the same numbers.
type partitioningClaims struct {
	// fullest is the fullest range ever measured, at any look during the
	// load or at the end; over counts the looks that found a range above
	// Θmax, endOver the ranges above it at the end.
	fullest       float64
	over, endOver int
	// sparsest is the emptiest range at any look that found more than one
	// range (so every range came from a split): a split in halves leaves
	// no range below half the split line.
	sparsest float64
	// end and endSigma are the fullness at the end (mean, σ over ranges);
	// inStep is what splits in step would leave for the data loaded.
	end, endSigma float64
	inStep        inStep
	// load and loadSigma are the looks' mean and σ over ranges, each look
	// weighted by the data loaded while it stood (dataWeighted): the
	// fullness as the data grows, which is what the split rule decides.
	// timeLoad and timeLoadSigma weight each look by the time it stood
	// (timeWeighted): they also count how long writes waited at the
	// backpressure line for a split, which the machine's speed decides, so
	// they are reported and not judged.
	load, loadSigma         float64
	timeLoad, timeLoadSigma float64
	// loadInStep is load's value had every range split in step at every
	// look (splitInStep of the look's data), weighted the same way: what
	// the split rule gives at this data size, where the load stops.
	loadInStep float64
}

func (m partitioningMeasured) claims(r partitioningResult) partitioningClaims {
	c := partitioningClaims{endOver: r.overExact, inStep: splitInStep(r.data, r.maxBytes, m.fill)}
	c.end, c.endSigma = plMeanStd(r.exact)
	for _, f := range r.exact {
		c.fullest = max(c.fullest, f)
	}
	c.sparsest = 1
	for _, smp := range r.samples {
		for _, f := range smp.exact {
			c.fullest = max(c.fullest, f)
			if len(smp.exact) > 1 {
				c.sparsest = min(c.sparsest, f)
			}
		}
		if smp.over > 0 {
			c.over++
		}
	}
	c.load, c.loadSigma = dataWeighted(r.samples, r.data)
	ideal := make([]fullnessSample, len(r.samples))
	for i, smp := range r.samples {
		ideal[i] = fullnessSample{data: smp.data, exact: []float64{splitInStep(smp.data, r.maxBytes, m.fill).fullness}}
	}
	c.loadInStep, _ = dataWeighted(ideal, r.data)
	c.timeLoad, c.timeLoadSigma = timeWeighted(r.samples, r.loadSecs)
	return c
}

// inStep is the state splits in step leave: ranges ranges, each fullness
// full of Θmax.
type inStep struct {
	ranges   int
	fullness float64
}

// splitInStep returns what data bytes leave when every range grows in step
// from one range and splits in halves once above fill × maxBytes: the
// fewest halvings that bring a range to the line or below.
func splitInStep(data, maxBytes uint64, fill float64) inStep {
	line := fill * float64(maxBytes)
	s := inStep{ranges: 1, fullness: float64(data) / float64(maxBytes)}
	for float64(data)/float64(s.ranges) > line {
		s.ranges *= 2
	}
	s.fullness = float64(data) / float64(s.ranges) / float64(maxBytes)
	return s
}

// timeWeighted returns the mean over looks of each look's mean fullness
// and of its σ over ranges, each look weighted by the time from it to the
// next (the last: to the end of the load at end seconds; none counts past
// it), so that looks that took long to scan count for as long as they
// stood. The load before the first look is not covered.
func timeWeighted(samples []fullnessSample, end float64) (mean, sigma float64) {
	var total float64
	for i, smp := range samples {
		next := end
		if i+1 < len(samples) {
			next = samples[i+1].at
		}
		w := max(min(next, end)-smp.at, 0)
		m, sd := plMeanStd(smp.exact)
		mean, sigma, total = mean+w*m, sigma+w*sd, total+w
	}
	if total == 0 {
		return 0, 0
	}
	return mean / total, sigma / total
}

// dataWeighted returns the mean over looks of each look's mean fullness
// and of its σ over ranges, each look weighted by the bytes loaded from it
// to the next (the last: to end bytes, the data at the end of the load).
// A look taken while writes wait for a split weighs nothing, however long
// the split takes. The data before the first look is not covered.
func dataWeighted(samples []fullnessSample, end uint64) (mean, sigma float64) {
	var total float64
	for i, smp := range samples {
		next := end
		if i+1 < len(samples) {
			next = samples[i+1].data
		}
		w := max(float64(next)-float64(smp.data), 0)
		m, sd := plMeanStd(smp.exact)
		mean, sigma, total = mean+w*m, sigma+w*sd, total+w
	}
	if total == 0 {
		return 0, 0
	}
	return mean / total, sigma / total
}

func (m partitioningMeasured) report(opts Options, out io.Writer) error {
	p := m.p
	fmt.Fprintf(out, "## partitioning\n\n")
	fmt.Fprintf(out, "Machine load average (1 min) at start / end: %s / %s.\n\n", m.load0, m.load1)
	fmt.Fprintf(out, "%d records of 1,010-byte values (%.0f MiB logical), loaded by 32 threads into a fresh 1-node cluster per Θmax; Θmin = Θmax/4; "+
		"ranges split above %.3g × Θmax; load splits off; settled = no range above Θmax (as reported) and the count unchanged for %v. Quick: %v. Total %.0f s.\n\n",
		p.records, float64(p.records*plRecordBytes)/(1<<20), m.fill, p.settle, m.quick, m.secs)
	rows := [][]string{}
	for _, r := range m.results {
		c := m.claims(r)
		rm, rs := plMeanStd(r.reported)
		settled := plSecs(time.Duration(r.settleSecs * float64(time.Second)))
		if !r.settled {
			settled = "> " + settled + " (not settled)"
		}
		rows = append(rows, []string{plMiB(float64(r.maxBytes)), strconv.Itoa(r.ranges), fmt.Sprintf("%.1f", r.loadSecs), settled,
			fmt.Sprintf("%.0f%% / %.0f%%", 100*rm, 100*rs),
			fmt.Sprintf("%.0f%% / %.0f%%", 100*c.end, 100*c.endSigma),
			fmt.Sprintf("%.0f%%–%.0f%%", 100*plQuantile(r.exact, 0), 100*plQuantile(r.exact, 1)),
			fmt.Sprintf("%d at %.0f%%", c.inStep.ranges, 100*c.inStep.fullness),
			strconv.Itoa(r.overExact)})
	}
	plTable(out, []string{"Θmax MiB", "ranges", "load s", "settled after s", "fullness mean / σ (reported size)",
		"fullness mean / σ (exact bytes)", "exact min–max", "splits in step would leave", "ranges > Θmax (exact)"}, rows)
	for _, r := range m.results {
		c := m.claims(r)
		verdict := "within"
		if c.load < 0.6 || c.load > 0.8 || c.loadSigma >= 0.2 {
			verdict = "outside"
		}
		fmt.Fprintf(out, "- Θmax %s MiB: fullest range ever %.1f%% of Θmax; %d looks and %d ranges at the end above it; emptiest range at a look %.1f%%. "+
			"At the end %d ranges at %.0f%% ± %.0f%% (in step: %d at %.0f%%). Over the load, weighted by data loaded: %.0f%% ± %.0f%% (in step: %.0f%%), %s ElasCass's 60–80%% with σ < 20%% "+
			"(weighted by time, which also counts writes waiting for splits: %.0f%% ± %.0f%%).\n",
			plMiB(float64(r.maxBytes)), 100*c.fullest, c.over, c.endOver, 100*c.sparsest, r.ranges, 100*c.end, 100*c.endSigma,
			c.inStep.ranges, 100*c.inStep.fullness, 100*c.load, 100*c.loadSigma, 100*c.loadInStep, verdict, 100*c.timeLoad, 100*c.timeLoadSigma)
	}
	fmt.Fprintln(out)
	m.duringLoad(out)
	if err := writeFigure(opts, out, "partitioning", "fullness", partitioningChart(m.results)); err != nil {
		return err
	}
	return writeFigure(opts, out, "partitioning", "during-load", partitioningLoadChart(m.results, m.fill))
}

// duringLoad reports the samples taken while the data loaded: the ranges
// must stay bounded all along, not only once settled.
func (m partitioningMeasured) duringLoad(out io.Writer) {
	fmt.Fprintf(out, "While loading (exact bytes of every range, one look every %v plus the time a look takes):\n\n", m.p.every)
	rows := [][]string{}
	for _, r := range m.results {
		if len(r.samples) == 0 {
			rows = append(rows, []string{plMiB(float64(r.maxBytes)), "0", "–", "–", "–", "–", "–", "–", "–", "–", "–"})
			continue
		}
		c := m.claims(r)
		lo, hi, sigma, changed := 1e9, 0.0, 0.0, 0
		var means []float64
		for _, smp := range r.samples {
			changed += smp.changed
			if len(smp.exact) == 0 {
				continue // no range held data yet
			}
			mean, sd := plMeanStd(smp.exact)
			means = append(means, mean)
			lo, hi, sigma = min(lo, mean), max(hi, mean), max(sigma, sd)
		}
		overall, _ := plMeanStd(means)
		rows = append(rows, []string{plMiB(float64(r.maxBytes)), strconv.Itoa(len(r.samples)),
			fmt.Sprintf("%s–%s", plMiB(float64(r.samples[0].data)), plMiB(float64(r.samples[len(r.samples)-1].data))),
			fmt.Sprintf("%.0f%%", 100*overall), fmt.Sprintf("%.0f%% / %.0f%%", 100*c.load, 100*c.loadSigma),
			fmt.Sprintf("%.0f%% / %.0f%%", 100*c.timeLoad, 100*c.timeLoadSigma),
			fmt.Sprintf("%.0f%%–%.0f%%", 100*lo, 100*hi), fmt.Sprintf("%.0f%%", 100*sigma),
			fmt.Sprintf("%.1f%%", 100*c.fullest), strconv.Itoa(c.over), strconv.Itoa(changed)})
	}
	plTable(out, []string{"Θmax MiB", "samples", "data MiB", "mean fullness over the looks", "data-weighted mean / σ", "time-weighted mean / σ", "each look's mean (lowest–highest)",
		"largest σ in a look", "fullest range ever (looks and end)", "looks with a range > Θmax", "ranges split during a look (measured as their halves)"}, rows)
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
	r.exact, r.overExact, r.data = final.exact, final.over, final.data
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
	start := time.Now()
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
			smp.at = time.Since(start).Seconds()
			samples = append(samples, smp)
		}
	}
}

// sampleFullness scans the whole key space for every key's exact bytes
// and counts each key in the range that holds it once the scan is done: a
// range that split or merged while it was scanned is measured as what it
// became, so every range is judged at every look. resp, the ranges as the
// look began, counts the ranges that changed. The scan does not follow
// resp's spans: the directory is not a tiling of the key space while a
// split is reported (the left half's new descriptor can arrive before the
// right half's, leaving the right half's keys in no listed range), and a
// look that scanned by spans then counted the right halves of splits in
// flight as empty.
func sampleFullness(ctx context.Context, cl *client.Client, resp *tidekvpb.RangesResponse, maxBytes uint64) (fullnessSample, error) {
	var smp fullnessSample
	type kv struct {
		key []byte
		n   uint64
	}
	var seen []kv
	if err := plSpanBytes(ctx, cl, nil, nil, func(key []byte, n uint64) {
		seen = append(seen, kv{key, n})
	}); err != nil {
		return smp, fmt.Errorf("scanning the key space: %w", err)
	}
	now, err := plTiling(ctx, cl)
	if err != nil {
		return smp, err
	}
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

// plTiling returns the ranges sorted by start key once they tile the key
// space (each starts where the one before ends, from "" to ""): asked
// again every 20 ms for up to 2 s while a split is being reported.
func plTiling(ctx context.Context, cl *client.Client) ([]*tidekvpb.RangeInfo, error) {
	for range 100 {
		resp, err := plRanges(ctx, cl)
		if err != nil {
			return nil, err
		}
		now := resp.GetRanges()
		slices.SortFunc(now, func(a, b *tidekvpb.RangeInfo) int {
			return bytes.Compare(a.GetDesc().GetStartKey(), b.GetDesc().GetStartKey())
		})
		if tiles(now) {
			return now, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil, errors.New("the range directory did not tile the key space within 2 s")
}

// tiles reports whether ranges sorted by start key cover the key space
// once, without gap or overlap.
func tiles(ranges []*tidekvpb.RangeInfo) bool {
	var end []byte // "" at the start: the key space's first key
	for i, ri := range ranges {
		d := ri.GetDesc()
		if !bytes.Equal(d.GetStartKey(), end) || i < len(ranges)-1 && len(d.GetEndKey()) == 0 {
			return false
		}
		end = d.GetEndKey()
	}
	return len(ranges) > 0 && len(end) == 0
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
