package sim

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/units"
)

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
				return nodeMetric(st, n, field, key)
			}
		}
	}
	if v, ok := statMetric(st, key); ok {
		return v, nil
	}
	if v, ok := rangeMetric(s, key); ok {
		return v, nil
	}
	if v, ok := counterMetric(c, key); ok {
		return v, nil
	}
	return 0, fmt.Errorf("assert: unknown metric %q (known: %s)", key, strings.Join(AssertKeys, " "))
}

// nodeMetric is the nN.FIELD metric of node n (key names it in the error).
func nodeMetric(st Step, n uint64, field, key string) (float64, error) {
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

// statMetric is the metric key of the cluster's current state st, and false
// when key names none.
func statMetric(st Step, key string) (float64, bool) {
	switch key {
	case "imbalance.replicas":
		return st.Imbalance.Replicas, true
	case "imbalance.leases":
		return st.Imbalance.Leases, true
	case "imbalance.bytes":
		return st.Imbalance.Bytes, true
	case "imbalance.qps":
		return st.Imbalance.QPS, true
	case "under-replicated":
		return float64(st.UnderReplicated), true
	case "over-replicated":
		return float64(st.OverReplicated), true
	case "unavailable":
		return float64(st.Unavailable), true
	case "ranges":
		return float64(st.Ranges), true
	case "in-flight":
		return float64(st.InFlight), true
	case "max-cpu":
		m := 0.0
		for _, n := range st.Nodes {
			m = math.Max(m, n.CPU)
		}
		return m, true
	case "bootstrapping":
		k := 0
		for _, n := range st.Nodes {
			if !n.Gone && n.Phase != placement.PhaseNone {
				k++
			}
		}
		return float64(k), true
	}
	return 0, false
}

// rangeMetric is the metric key computed over the simulation's ranges, and
// false when key names none.
func rangeMetric(s *Sim, key string) (float64, bool) {
	switch key {
	case "max-range-bytes", "min-range-bytes":
		lo, hi := math.Inf(1), 0.0
		for _, r := range s.ranges {
			lo, hi = math.Min(lo, r.bytes), math.Max(hi, r.bytes)
		}
		if key == "max-range-bytes" {
			return hi, true
		}
		return lo, true
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
		return float64(k), true
	case "min-pair-bytes":
		m := math.Inf(1)
		for i := 0; i+1 < len(s.ranges); i++ {
			m = math.Min(m, s.ranges[i].bytes+s.ranges[i+1].bytes)
		}
		return m, true
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
		return m, true
	case "adaptive-learners":
		k := 0
		for _, r := range s.ranges {
			for _, rep := range r.replicas {
				if rep.Adaptive {
					k++
				}
			}
		}
		return float64(k), true
	}
	return 0, false
}

// counterMetric is the operator counter key of c, and false when key names
// none.
func counterMetric(c Counters, key string) (float64, bool) {
	switch key {
	case "adds":
		return float64(c.AddVoters), true
	case "learners":
		return float64(c.AddLearners), true
	case "removes":
		return float64(c.Removes), true
	case "moves":
		return float64(c.Moves), true
	case "replica-changes":
		return float64(c.ReplicaChanges()), true
	case "lease-transfers":
		return float64(c.LeaseTransfers), true
	case "splits":
		return float64(c.Splits), true
	case "merges":
		return float64(c.Merges), true
	case "failed":
		return float64(c.Failed), true
	case "throttled":
		return float64(c.Throttled), true
	case "policy-bugs":
		return float64(c.PolicyBugs), true
	case "thrash":
		return float64(c.Thrash()), true
	case "thrash.replicas":
		return float64(c.ThrashReplicas), true
	case "thrash.leases":
		return float64(c.ThrashLeases), true
	case "unsplits":
		return float64(c.Unsplits), true
	case "bytes-moved":
		return float64(c.BytesMoved), true
	}
	return 0, false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
