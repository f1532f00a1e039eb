package sim

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/units"
)

// Arg is one argument of a script command: key, or key=value, or
// key=(v1, v2) (the datadriven argument forms).
type Arg struct {
	Key  string
	Vals []string
}

// ErrAssert is wrapped by the error Exec returns when an assertion fails.
var ErrAssert = errors.New("assertion failed")

// Interpreter runs scenario scripts, one command at a time: the commands
// of the files in testdata/ (parse a line with datadriven.ParseLine to
// replay one elsewhere). Commands:
//
//	cluster nodes=N ranges=R [rf=K] [bytes-per-range=SIZE] [keys=N]
//	        [localities=(a,b,…)] [capacity=QPS] [disk=RATE] [seed=S]
//	workload [uniform | zipf=S [scramble] | hot-keys=K hot-start=I hot-share=F]
//	         [qps=Q] [keys=N] [reads=F] [any-replica-reads=F] [growth=RATE]
//	config KEY=VALUE…          simulator options (tick, decide-every,
//	                           snapshots-per-node, max-in-flight,
//	                           ops-per-minute, bandwidth,
//	                           snapshot-overhead, merge-duration, dead-after,
//	                           thrash-window, follower-write-cost) or policy
//	                           configuration overrides (see ApplyOverrides)
//	add-node [locality=L] [capacity=QPS] [disk=RATE]
//	kill-node N | restart-node N | decommission N
//	grow-data bytes=SIZE [range=R]
//	run for=DURATION [every=DURATION] [log=N]
//	                           advance; print a timeline line per every, the
//	                           log of the run (first N entries, default 20)
//	                           and a summary
//	assert KEY(<=|>=|=|<|>)VALUE…
//	                           check metrics (see AssertKeys)
//	xassert KEY…VALUE…         a known policy defect: passes while at least
//	                           one check fails, fails once all hold
//	ops [range=R] [last=N]     the last N operators that ended (default 20)
//	nodes | ranges             print the current state
//
// workload, cluster settings and config given before cluster apply to it;
// afterwards workload replaces the workload (unset fields keep their
// values) and config rebuilds the policy.
type Interpreter struct {
	factory   PolicyFactory
	sim       *Sim
	overrides map[string]string
	opts      Options
	workload  Workload
	runStart  Counters
	run       Counters
}

// NewInterpreter returns an interpreter whose cluster runs policies built
// by factory (nil: Placement).
func NewInterpreter(factory PolicyFactory) *Interpreter {
	if factory == nil {
		factory = Placement
	}
	return &Interpreter{factory: factory, overrides: map[string]string{}, opts: DefaultOptions(), workload: DefaultWorkload()}
}

// Sim is the interpreter's simulation (nil before cluster).
func (in *Interpreter) Sim() *Sim { return in.sim }

// Exec runs one command and returns its output.
func (in *Interpreter) Exec(cmd string, args []Arg) (string, error) {
	if in.sim == nil && cmd != "cluster" && cmd != "workload" && cmd != "config" {
		return "", fmt.Errorf("%s: no cluster yet", cmd)
	}
	switch cmd {
	case "cluster":
		return in.cluster(args)
	case "workload":
		return in.setWorkload(args)
	case "config":
		return in.config(args)
	case "add-node":
		spec, err := nodeSpec(args)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("n%d\n", in.sim.AddNode(spec)), nil
	case "kill-node", "restart-node", "decommission":
		if len(args) != 1 || len(args[0].Vals) != 0 {
			return "", fmt.Errorf("%s takes a node ID", cmd)
		}
		id, err := strconv.ParseUint(strings.TrimPrefix(args[0].Key, "n"), 10, 64)
		if err != nil {
			return "", fmt.Errorf("%s: bad node %q", cmd, args[0].Key)
		}
		switch cmd {
		case "kill-node":
			err = in.sim.KillNode(id)
		case "restart-node":
			err = in.sim.RestartNode(id)
		default:
			err = in.sim.Decommission(id)
		}
		return "", err
	case "grow-data":
		var size uint64
		var rangeID uint64
		for _, a := range args {
			var err error
			switch a.Key {
			case "bytes":
				size, err = units.ParseBytes(val(a))
			case "range":
				rangeID, err = strconv.ParseUint(val(a), 10, 64)
			default:
				err = fmt.Errorf("unknown argument %q", a.Key)
			}
			if err != nil {
				return "", err
			}
		}
		return "", in.sim.GrowData(size, rangeID)
	case "transfer-lease":
		var rangeID, to uint64
		for _, a := range args {
			var err error
			switch a.Key {
			case "range":
				rangeID, err = strconv.ParseUint(val(a), 10, 64)
			case "to":
				to, err = strconv.ParseUint(strings.TrimPrefix(val(a), "n"), 10, 64)
			default:
				err = fmt.Errorf("unknown argument %q", a.Key)
			}
			if err != nil {
				return "", fmt.Errorf("transfer-lease: %w", err)
			}
		}
		return "", in.sim.TransferLease(rangeID, to)
	case "run":
		return in.runCmd(args)
	case "assert":
		return in.assert(args)
	case "xassert":
		out, err := in.assert(args)
		switch {
		case errors.Is(err, ErrAssert):
			return strings.ReplaceAll(out, " FAIL\n", " FAIL (known defect)\n"), nil
		case err != nil:
			return out, err
		}
		return out, fmt.Errorf("%w: xassert passed: the known defect is gone, make it an assert", ErrAssert)
	case "ops":
		return in.opsCmd(args)
	case "nodes":
		return FormatNodes(in.sim.Stat()), nil
	case "ranges":
		return in.sim.formatRanges(), nil
	}
	return "", fmt.Errorf("unknown command %q", cmd)
}

func val(a Arg) string {
	if len(a.Vals) == 0 {
		return ""
	}
	return a.Vals[0]
}

func (in *Interpreter) cluster(args []Arg) (string, error) {
	if in.sim != nil {
		return "", errors.New("cluster: already have one")
	}
	c := ClusterSpec{Nodes: 3, Ranges: 1, RF: 3}
	if rf, ok := in.overrides["rf"]; ok {
		c.RF, _ = strconv.Atoi(rf)
	}
	for _, a := range args {
		var err error
		switch a.Key {
		case "nodes":
			c.Nodes, err = strconv.Atoi(val(a))
		case "ranges":
			c.Ranges, err = strconv.Atoi(val(a))
		case "rf":
			c.RF, err = strconv.Atoi(val(a))
			in.overrides["rf"] = val(a)
		case "bytes-per-range":
			c.BytesPerRange, err = units.ParseBytes(val(a))
		case "keys":
			in.workload.Keys, err = strconv.Atoi(val(a))
		case "localities":
			c.Localities = a.Vals
		case "capacity":
			c.Node.Capacity, err = strconv.ParseFloat(val(a), 64)
		case "disk":
			c.Node.DiskBandwidth, err = units.ParseRate(val(a))
		case "seed":
			in.opts.Seed, err = strconv.ParseUint(val(a), 10, 64)
		default:
			err = fmt.Errorf("unknown argument %q", a.Key)
		}
		if err != nil {
			return "", fmt.Errorf("cluster: %w", err)
		}
	}
	if _, ok := in.overrides["rf"]; !ok {
		in.overrides["rf"] = strconv.Itoa(c.RF)
	}
	p, err := in.factory(in.overrides)
	if err != nil {
		return "", err
	}
	s, err := New(c, in.workload, p, in.opts)
	if err != nil {
		return "", err
	}
	in.sim = s
	return FormatNodes(s.Stat()), nil
}

func (in *Interpreter) setWorkload(args []Arg) (string, error) {
	w := in.workload
	if in.sim != nil {
		w = in.sim.Workload()
	}
	for _, a := range args {
		var err error
		switch a.Key {
		case "uniform":
			w.Dist = Uniform
		case "zipf":
			w.Dist = Zipf
			w.ZipfS, err = strconv.ParseFloat(val(a), 64)
		case "scramble":
			w.Scramble = true
		case "hot-keys":
			w.Dist = HotSpan
			w.HotKeys, err = strconv.Atoi(val(a))
		case "hot-start":
			w.HotStart, err = strconv.Atoi(val(a))
		case "hot-share":
			w.HotShare, err = strconv.ParseFloat(val(a), 64)
		case "qps":
			w.QPS, err = strconv.ParseFloat(val(a), 64)
		case "keys":
			w.Keys, err = strconv.Atoi(val(a))
		case "reads":
			w.ReadShare, err = strconv.ParseFloat(val(a), 64)
		case "any-replica-reads":
			w.AnyReplicaReads, err = strconv.ParseFloat(val(a), 64)
		case "growth":
			w.GrowthBytesPerSec, err = units.ParseRate(val(a))
		default:
			err = fmt.Errorf("unknown argument %q", a.Key)
		}
		if err != nil {
			return "", fmt.Errorf("workload: %w", err)
		}
	}
	if w.Dist != Zipf {
		w.Scramble = false
	}
	if err := w.Validate(); err != nil {
		return "", err
	}
	in.workload = w
	if in.sim != nil {
		return "", in.sim.SetWorkload(w)
	}
	return "", nil
}

func (in *Interpreter) config(args []Arg) (string, error) {
	o := in.opts
	if in.sim != nil {
		o = in.sim.Options()
	}
	overrides := map[string]string{}
	for k, v := range in.overrides {
		overrides[k] = v
	}
	for _, a := range args {
		v := val(a)
		var err error
		switch a.Key {
		case "tick":
			o.Tick, err = time.ParseDuration(v)
		case "decide-every":
			o.Control.Interval, err = time.ParseDuration(v)
		case "snapshots-per-node":
			o.Control.Runner.MaxSnapshotsPerNode, err = strconv.Atoi(v)
		case "max-in-flight":
			o.Control.Runner.MaxInFlight, err = strconv.Atoi(v)
		case "ops-per-minute":
			o.Control.Runner.OpsPerMinute, err = strconv.Atoi(v)
		case "bandwidth":
			o.Control.Runner.MigrationRate, err = units.ParseRate(v)
		case "snapshot-overhead":
			o.SnapshotOverhead, err = time.ParseDuration(v)
		case "merge-duration":
			o.MergeDuration, err = time.ParseDuration(v)
		case "dead-after":
			o.Control.DeadNodeGrace, err = time.ParseDuration(v)
		case "thrash-window":
			o.ThrashWindow, err = time.ParseDuration(v)
		case "follower-write-cost":
			o.FollowerWriteCost, err = strconv.ParseFloat(v, 64)
		case "report-every":
			o.ReportEvery, err = time.ParseDuration(v)
		default:
			overrides[a.Key] = v
		}
		if err != nil {
			return "", fmt.Errorf("config %s: %w", a.Key, err)
		}
	}
	p, err := in.factory(overrides)
	if err != nil {
		return "", err
	}
	in.overrides, in.opts = overrides, o
	if in.sim != nil {
		in.sim.SetOptions(o)
		if err := in.sim.SetPolicy(p); err != nil {
			return "", err
		}
	}
	return "", nil
}

func nodeSpec(args []Arg) (NodeSpec, error) {
	var spec NodeSpec
	for _, a := range args {
		var err error
		switch a.Key {
		case "locality":
			spec.Locality = val(a)
		case "capacity":
			spec.Capacity, err = strconv.ParseFloat(val(a), 64)
		case "disk":
			spec.DiskBandwidth, err = units.ParseRate(val(a))
		default:
			err = fmt.Errorf("unknown argument %q", a.Key)
		}
		if err != nil {
			return spec, err
		}
	}
	return spec, nil
}

func (in *Interpreter) runCmd(args []Arg) (string, error) {
	var d, every time.Duration
	limit := 20
	for _, a := range args {
		var err error
		switch a.Key {
		case "for":
			d, err = time.ParseDuration(val(a))
		case "every":
			every, err = time.ParseDuration(val(a))
		case "log":
			limit, err = strconv.Atoi(val(a))
		default:
			err = fmt.Errorf("unknown argument %q", a.Key)
		}
		if err != nil {
			return "", fmt.Errorf("run: %w", err)
		}
	}
	if d <= 0 {
		return "", errors.New("run: needs for=DURATION")
	}
	s := in.sim
	from, logFrom, stepFrom := s.Now(), len(s.log), len(s.steps)
	before := s.Total()
	s.RunFor(d)
	in.run = s.Total().Sub(before)
	var b strings.Builder
	if every > 0 {
		b.WriteString(FormatTimeline(s.steps[stepFrom:], from, every, before))
	}
	if entries := s.log[logFrom:]; len(entries) > 0 && limit >= 0 {
		b.WriteString("log:\n")
		b.WriteString(FormatLog(entries, limit))
	}
	b.WriteString(FormatSummary(s.Stat(), in.run))
	return b.String(), nil
}

// AssertKeys lists the metrics assert knows. Counter keys count since the
// start; with a "last." prefix, during the last run.
var AssertKeys = []string{
	"imbalance.replicas", "imbalance.leases", "imbalance.bytes", "imbalance.qps",
	"under-replicated", "over-replicated", "unavailable", "ranges", "in-flight",
	"max-cpu", "max-range-bytes", "min-range-bytes", "min-pair-bytes", "min-up-voters", "same-locality", "adaptive-learners", "bootstrapping",
	"nN.replicas", "nN.leases", "nN.phase", "nN.gone",
	"adds", "learners", "removes", "moves", "replica-changes", "lease-transfers", "splits", "merges",
	"failed", "throttled", "policy-bugs", "thrash", "thrash.replicas", "thrash.leases", "unsplits", "bytes-moved",
}

var assertRE = regexp.MustCompile(`^([a-z0-9.\-]+?)(<=|>=|=|<|>)([0-9.eE+\-]+[KMGTiB]*)$`)

func (in *Interpreter) assert(args []Arg) (string, error) {
	var b strings.Builder
	failed := 0
	for _, a := range args {
		expr := a.Key
		if len(a.Vals) > 0 {
			expr += "=" + strings.Join(a.Vals, ",")
		}
		m := assertRE.FindStringSubmatch(expr)
		if m == nil {
			return "", fmt.Errorf("assert: cannot parse %q", expr)
		}
		key, op := m[1], m[2]
		want, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			var n uint64
			if n, err = units.ParseBytes(m[3]); err != nil {
				return "", fmt.Errorf("assert: %q: %w", expr, err)
			}
			want = float64(n)
		}
		got, err := in.metric(key)
		if err != nil {
			return "", err
		}
		ok := false
		switch op {
		case "<=":
			ok = got <= want+1e-9
		case ">=":
			ok = got >= want-1e-9
		case "<":
			ok = got < want
		case ">":
			ok = got > want
		case "=":
			ok = math.Abs(got-want) <= 1e-9
		}
		verdict := "ok"
		if !ok {
			verdict = "FAIL"
			failed++
		}
		shown := strconv.FormatFloat(round(got), 'f', -1, 64)
		if strings.Contains(key, "bytes") && got >= 0 && !math.IsInf(got, 0) {
			shown = units.Compact(uint64(got))
		}
		fmt.Fprintf(&b, "%s %s %s: %s %s\n", key, op, m[3], shown, verdict)
	}
	if failed > 0 {
		return b.String(), fmt.Errorf("%w: %d of %d", ErrAssert, failed, len(args))
	}
	return b.String(), nil
}

func round(x float64) float64 { return math.Round(x*1000) / 1000 }

func (in *Interpreter) metric(key string) (float64, error) {
	s := in.sim
	st := s.Stat()
	c := s.Total()
	if k, ok := strings.CutPrefix(key, "last."); ok {
		key, c = k, in.run
	}
	if rest, ok := strings.CutPrefix(key, "n"); ok {
		if id, field, ok := strings.Cut(rest, "."); ok {
			if n, err := strconv.ParseUint(id, 10, 64); err == nil {
				for _, ns := range st.Nodes {
					if ns.ID != n {
						continue
					}
					switch field {
					case "replicas":
						return float64(ns.Replicas), nil
					case "leases":
						return float64(ns.Leases), nil
					case "phase":
						return float64(ns.Phase), nil
					case "gone":
						return b2f(ns.Gone), nil
					}
				}
				return 0, fmt.Errorf("assert: no node metric %q", key)
			}
		}
	}
	switch key {
	case "imbalance.replicas":
		return st.Imbalance.Replicas, nil
	case "imbalance.leases":
		return st.Imbalance.Leases, nil
	case "imbalance.bytes":
		return st.Imbalance.Bytes, nil
	case "imbalance.qps":
		return st.Imbalance.QPS, nil
	case "under-replicated":
		return float64(st.UnderReplicated), nil
	case "over-replicated":
		return float64(st.OverReplicated), nil
	case "unavailable":
		return float64(st.Unavailable), nil
	case "ranges":
		return float64(st.Ranges), nil
	case "in-flight":
		return float64(st.InFlight), nil
	case "max-cpu":
		m := 0.0
		for _, n := range st.Nodes {
			m = math.Max(m, n.CPU)
		}
		return m, nil
	case "max-range-bytes", "min-range-bytes":
		lo, hi := math.Inf(1), 0.0
		for _, r := range s.ranges {
			lo, hi = math.Min(lo, r.bytes), math.Max(hi, r.bytes)
		}
		if key == "max-range-bytes" {
			return hi, nil
		}
		return lo, nil
	case "same-locality":
		k := 0
		for _, r := range s.ranges {
			seen := map[string]bool{}
			for _, v := range r.voters() {
				n := s.node(v)
				if n == nil || n.spec.Locality == "" || !n.up() {
					continue
				}
				if seen[n.spec.Locality] {
					k++
					break
				}
				seen[n.spec.Locality] = true
			}
		}
		return float64(k), nil
	case "min-pair-bytes":
		m := math.Inf(1)
		for i := 0; i+1 < len(s.ranges); i++ {
			m = math.Min(m, s.ranges[i].bytes+s.ranges[i+1].bytes)
		}
		return m, nil
	case "min-up-voters":
		m := math.Inf(1)
		for _, r := range s.ranges {
			up := 0
			for _, v := range r.voters() {
				if s.up(v) {
					up++
				}
			}
			m = math.Min(m, float64(up))
		}
		return m, nil
	case "adaptive-learners":
		k := 0
		for _, r := range s.ranges {
			for _, rep := range r.replicas {
				if rep.Adaptive {
					k++
				}
			}
		}
		return float64(k), nil
	case "bootstrapping":
		k := 0
		for _, n := range st.Nodes {
			if !n.Gone && n.Phase != placement.PhaseNone {
				k++
			}
		}
		return float64(k), nil
	case "adds":
		return float64(c.AddVoters), nil
	case "learners":
		return float64(c.AddLearners), nil
	case "removes":
		return float64(c.Removes), nil
	case "moves":
		return float64(c.Moves), nil
	case "replica-changes":
		return float64(c.ReplicaChanges()), nil
	case "lease-transfers":
		return float64(c.LeaseTransfers), nil
	case "splits":
		return float64(c.Splits), nil
	case "merges":
		return float64(c.Merges), nil
	case "failed":
		return float64(c.Failed), nil
	case "throttled":
		return float64(c.Throttled), nil
	case "policy-bugs":
		return float64(c.PolicyBugs), nil
	case "thrash":
		return float64(c.Thrash()), nil
	case "thrash.replicas":
		return float64(c.ThrashReplicas), nil
	case "thrash.leases":
		return float64(c.ThrashLeases), nil
	case "unsplits":
		return float64(c.Unsplits), nil
	case "bytes-moved":
		return float64(c.BytesMoved), nil
	}
	return 0, fmt.Errorf("assert: unknown metric %q (known: %s)", key, strings.Join(AssertKeys, " "))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// formatRanges prints every range: bounds, replicas (v voter, l learner,
// a adaptive learner, * leaseholder), bytes and requests.
func (s *Sim) formatRanges() string {
	var b strings.Builder
	for _, r := range s.ranges {
		var reps []string
		for _, rep := range r.replicas {
			t := "v"
			if rep.Type == placement.Learner {
				t = "l"
				if rep.Adaptive {
					t = "a"
				}
			}
			lh := ""
			if rep.Node == r.lease {
				lh = "*"
			}
			reps = append(reps, fmt.Sprintf("%s%d%s", t, rep.Node, lh))
		}
		sort.Strings(reps)
		busy := ""
		if b, _ := s.loop.Runner.Busy(); b[r.id] {
			busy = " busy"
		}
		fmt.Fprintf(&b, "%s %s %s qps=%.0f hot=%.2f%s\n", r, strings.Join(reps, ","), units.Compact(uint64(r.bytes)), r.qps, r.hotShare, busy)
	}
	return b.String()
}

func (in *Interpreter) opsCmd(args []Arg) (string, error) {
	last, rangeID := 20, uint64(0)
	for _, a := range args {
		var err error
		switch a.Key {
		case "last":
			last, err = strconv.Atoi(val(a))
		case "range":
			rangeID, err = strconv.ParseUint(val(a), 10, 64)
		default:
			err = fmt.Errorf("unknown argument %q", a.Key)
		}
		if err != nil {
			return "", fmt.Errorf("ops: %w", err)
		}
	}
	var recs []OpRecord
	for _, r := range in.sim.ops {
		if rangeID == 0 || r.Op.Range == rangeID || r.Op.Kind == placement.OpMerge && r.Op.Other == rangeID {
			recs = append(recs, r)
		}
	}
	if len(recs) > last {
		recs = recs[len(recs)-last:]
	}
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s-%s %s", fmtDur(r.Started), fmtDur(r.Ended), control.Describe(r.Op))
		if r.Err != "" {
			fmt.Fprintf(&b, " FAILED: %s", r.Err)
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}
