package scenario

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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
	keys  int
	rates []int
	step  time.Duration
	// settle is how long each rate runs, unmeasured, before its step:
	// steady state, learners already serving.
	settle time.Duration
	// The reaction run: a fresh RF1 + adaptive cluster, idle, then
	// reactRate reads/s for reactFor, measured per second.
	reactRate   int
	reactFor    time.Duration
	inflight    int     // Admission.MaxInflight per node
	adaptiveQPS float64 // AdaptiveReadQPS of the adaptive configuration
	timeout     time.Duration
	workers     int // client goroutines; a request finding all busy counts as failed
}

func adaptiveDefaults(opts Options) adaptiveParams {
	p := adaptiveParams{keys: 20_000, rates: []int{1000, 2000, 4000, 8000, 12000}, step: 15 * time.Second, settle: 10 * time.Second,
		reactRate: 4000, reactFor: 20 * time.Second, inflight: 1, adaptiveQPS: 300, timeout: time.Second, workers: 256}
	if opts.Quick {
		p.keys, p.rates, p.step, p.settle, p.reactFor = 2_000, []int{2000, 6000}, 4*time.Second, 3*time.Second, 10*time.Second
	}
	if opts.Duration > 0 {
		p.step = opts.Duration
	}
	return p
}

// The configurations the verdict compares.
const (
	adaptiveRF1AdaptiveClient = "RF1 + adaptive, client"
	adaptiveRF3Client         = "RF3, client"
	adaptiveRF3RoundRobin     = "RF3, round robin"
)

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
	// Per second of scheduled send time: reads sent, and failed (not
	// sent included).
	secSent, secFailed []int64
}

// failedShare is the share of the step's sent reads that failed, in %.
func (s adaptiveStep) failedShare() float64 {
	if s.sent == 0 {
		return 0
	}
	return 100 * float64(s.overloaded+s.timeouts+s.other+s.dropped) / float64(s.sent)
}

func runAdaptive(ctx context.Context, opts Options, out io.Writer) error {
	_, err := adaptive(ctx, opts, out)
	return err
}

// adaptive runs the scenario, writes its report to out and returns
// whether the restated targets were met (adaptiveVerdict).
func adaptive(ctx context.Context, opts Options, out io.Writer) (bool, error) {
	p := adaptiveDefaults(opts)
	progress := opts.Progress
	dir, cleanup, err := plWorkDir(opts, "adaptive")
	if err != nil {
		return false, err
	}
	defer cleanup()
	// The in-process nodes log through the standard logger: into a file.
	logf, err := os.Create(filepath.Join(dir, "nodes.log"))
	if err != nil {
		return false, err
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
		{adaptiveRF1AdaptiveClient, 1, true, readerClient},
		{"RF1 + adaptive, client refreshing ranges", 1, true, readerClientRefresh},
		{adaptiveRF3Client, 3, false, readerClient},
		{"RF1, round robin", 1, false, readerRoundRobin},
		{"RF1 + adaptive, round robin", 1, true, readerRoundRobin},
		{adaptiveRF3RoundRobin, 3, false, readerRoundRobin},
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
			return false, fmt.Errorf("%s: %w", c.name, err)
		}
		results[c.name] = steps
	}
	react, err := adaptiveReact(ctx, p, filepath.Join(dir, "react"), seed, progress)
	if err != nil {
		return false, fmt.Errorf("reaction run: %w", err)
	}

	met, err := adaptiveReport(out, opts, p, configs, results, react, time.Since(start), load0)
	if err != nil {
		return false, err
	}
	return met, ctx.Err()
}

// adaptiveReport writes the scenario's tables, figures and verdict to out
// and returns whether the restated targets were met.
func adaptiveReport(out io.Writer, opts Options, p adaptiveParams, configs []adaptiveConfig, results map[string][]adaptiveStep,
	react adaptiveReaction, took time.Duration, load0 string) (bool, error) {
	fmt.Fprintf(out, "## adaptive\n\n")
	fmt.Fprintf(out, "Machine load average (1 min) at start / end: %s / %s.\n\n", load0, plLoadAvg())
	fmt.Fprintf(out, "3 in-process nodes, Admission.MaxInflight %d per node, %d keys of 1,010 bytes in one range (load splits off), "+
		"Zipf(1.0) ANY reads sent open loop at each rate for %v, measured after %v at that rate unmeasured (steady state; rates rise without a pause), one attempt per read, %v deadline, %d sending goroutines. "+
		"Adaptive: AdaptiveReadQPS %.0f, at most 2 learners. Reaction run: a fresh RF1 + adaptive cluster, idle, then %d reads/s for %v. Quick: %v. Total %.0f s.\n\n",
		p.inflight, p.keys, p.step, p.settle, p.timeout, p.workers, p.adaptiveQPS, p.reactRate, p.reactFor, opts.Quick, took.Seconds())
	fmt.Fprintln(out, "Failed = overloaded (shed by admission control) + timed out + other errors + not sent (all client goroutines busy); latency over successful reads, from the scheduled send time.")
	fmt.Fprintln(out)
	var rows [][]string
	for _, c := range configs {
		for _, s := range results[c.name] {
			rows = append(rows, []string{c.name, strconv.Itoa(s.rate), fmt.Sprintf("%.0f", float64(s.ok)/p.step.Seconds()),
				fmt.Sprintf("%.1f%%", s.failedShare()),
				fmt.Sprintf("%d / %d / %d / %d", s.overloaded, s.timeouts, s.other, s.dropped),
				adaptiveMs(s.p50), adaptiveMs(s.p99), strconv.Itoa(s.learners), adaptiveQPSList(s.served), adaptiveQPSList(s.rejected), adaptiveScoreList(s.scores)})
		}
	}
	plTable(out, []string{"configuration", "offered reads/s", "served reads/s", "failed", "overloaded / timeout / other / not sent",
		"p50 ms", "p99 ms", "adaptive learners at end", "reads served/s per node", "requests shed per node", "median load score per node"}, rows)
	if err := writeFigure(opts, out, "adaptive", "failures", adaptiveChart(configs, results)); err != nil {
		return false, err
	}
	var serving, perSecond []string
	for _, at := range react.serving {
		serving = append(serving, adaptiveAfter(at))
	}
	if len(serving) == 0 {
		serving = []string{adaptiveAfter(-1)}
	}
	for i, n := range react.step.secSent {
		perSecond = append(perSecond, fmt.Sprintf("%.1f", share(float64(react.step.secFailed[i]), float64(n))))
	}
	fmt.Fprintf(out, "Reaction: %d reads/s on a fresh RF1 range: %.1f%% failed over %v, learners serving after %s, %d learners at the end. "+
		"Failed %% of sent, second by second: %s.\n\n",
		p.reactRate, react.step.failedShare(), p.reactFor, strings.Join(serving, ", "), react.learners, strings.Join(perSecond, " "))
	if err := writeFigure(opts, out, "adaptive", "reaction", adaptiveReactionChart(react)); err != nil {
		return false, err
	}
	lines, met := adaptiveVerdict(results, react)
	fmt.Fprintln(out, "Targets:")
	fmt.Fprintln(out)
	for _, l := range lines {
		fmt.Fprintf(out, "- %s\n", l)
	}
	fmt.Fprintln(out)
	return met, nil
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
