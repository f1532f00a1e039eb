package placement

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestDecide runs the policy scenarios in testdata/. Each case builds a
// snapshot from its input lines and prints the plan:
//
//	decide [rf=N] [range-max=MiB] [range-min=MiB] [split-qps=Q] [load-split-slack=S] [adaptive-qps=Q] [max-adaptive=N] [now=SECONDS] [cooldown=SECONDS] [rebalance=0|1]
//	node ID STATE [phase=1|2] [locality=L] [qps=Q] [cpu=C] [score=S] [capacity=Q] [clock-untrusted]
//	range ID START END v=1,2,3 [vsince=SECONDS] [l=4 [lsince=SECONDS]] [a=5] [lease=N] [mib=M] [qps=Q] [reads=Q] [replica-reads=Q] [replica-reads-unknown] [replica-read-peak=Q] [hits=H] [hot=SHARE] [writes=LOC:Q,...] [split=SECONDS] [busy] [stale] [rf=N]
//	boundary KEY   (a key space boundary, in ascending order)
//	recent RANGE kind=KIND [from=N] [to=N] at=SECONDS   (a completed operator)
//
// START/END "-" mean the ends of the key space; v lists voters, l plain
// learners, a adaptive learners.
func TestDecide(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd != "decide" {
				t.Fatalf("unknown command %q", td.Cmd)
			}
			cfg := DefaultConfig()
			s := Snapshot{Now: time.Unix(0, 0), Busy: map[uint64]bool{}}
			for _, a := range td.CmdArgs {
				v := 0.0
				if len(a.Vals) > 0 {
					v, _ = strconv.ParseFloat(a.Vals[0], 64)
				}
				switch a.Key {
				case "rf":
					cfg.ReplicationFactor = int(v)
				case "range-max":
					cfg.RangeMaxBytes = uint64(v * (1 << 20))
				case "range-min":
					cfg.RangeMinBytes = uint64(v * (1 << 20))
				case "split-qps":
					cfg.SplitQPS = v
				case "load-split-slack":
					cfg.LoadSplitSlack = v
				case "adaptive-qps":
					cfg.AdaptiveReadQPS = v
				case "max-adaptive":
					cfg.MaxAdaptiveReplicas = int(v)
				case "now":
					s.Now = time.Unix(int64(v), 0)
				case "cooldown":
					cfg.MergeCooldown = time.Duration(v) * time.Second
				case "rebalance":
					cfg.Rebalance = v != 0
				default:
					t.Fatalf("unknown argument %q", a.Key)
				}
			}
			for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
				if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				parseLine(t, &s, line)
			}
			plan := Decide(s, cfg)
			var b strings.Builder
			for _, op := range plan.Ops {
				fmt.Fprintf(&b, "%s: %s (%s)\n", op.Policy, op, op.Reason)
			}
			for _, n := range plan.Notes {
				fmt.Fprintf(&b, "note: %s\n", n)
			}
			if b.Len() == 0 {
				return "nothing to do\n"
			}
			return b.String()
		})
	})
}

func parseLine(t *testing.T, s *Snapshot, line string) {
	t.Helper()
	f := strings.Fields(line)
	if f[0] == "boundary" {
		s.Boundaries = append(s.Boundaries, []byte(f[1]))
		return
	}
	id, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		t.Fatalf("%q: bad id", line)
	}
	kv := func(fields []string) map[string]string {
		m := map[string]string{}
		for _, x := range fields {
			k, v, _ := strings.Cut(x, "=")
			m[k] = v
		}
		return m
	}
	num := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	nodes := func(s string) []uint64 {
		var out []uint64
		for _, x := range strings.Split(s, ",") {
			if x != "" {
				n, _ := strconv.ParseUint(x, 10, 64)
				out = append(out, n)
			}
		}
		return out
	}
	switch f[0] {
	case "node":
		n := Node{ID: id}
		switch f[2] {
		case "live":
			n.State = NodeLive
		case "suspect":
			n.State = NodeSuspect
		case "dead":
			n.State = NodeDead
		case "draining":
			n.State = NodeDraining
		default:
			t.Fatalf("%q: bad state", line)
		}
		m := kv(f[3:])
		_, n.ClockUntrusted = m["clock-untrusted"]
		n.Phase, n.Locality = Phase(num(m["phase"])), m["locality"]
		n.QPS, n.CPU, n.Score = num(m["qps"]), num(m["cpu"]), num(m["score"])
		n.Capacity = num(m["capacity"])
		s.Nodes = append(s.Nodes, n)
	case "range":
		key := func(k string) []byte {
			if k == "-" {
				return nil
			}
			return []byte(k)
		}
		r := Range{ID: id, Start: key(f[2]), End: key(f[3])}
		m := kv(f[4:])
		for _, v := range nodes(m["v"]) {
			rep := Replica{Node: v, Type: Voter}
			if v, ok := m["vsince"]; ok {
				rep.Since = time.Unix(int64(num(v)), 0)
			}
			r.Replicas = append(r.Replicas, rep)
		}
		for _, l := range nodes(m["l"]) {
			rep := Replica{Node: l, Type: Learner}
			if v, ok := m["lsince"]; ok {
				rep.Since = time.Unix(int64(num(v)), 0)
			}
			r.Replicas = append(r.Replicas, rep)
		}
		for _, a := range nodes(m["a"]) {
			r.Replicas = append(r.Replicas, Replica{Node: a, Type: Learner, Adaptive: true})
		}
		r.Leaseholder = uint64(num(m["lease"]))
		r.Bytes = uint64(num(m["mib"]) * (1 << 20))
		r.QPS, r.ReadQPS, r.HitsEWMA, r.HotKeyShare = num(m["qps"]), num(m["reads"]), num(m["hits"]), num(m["hot"])
		r.ReplicaReadQPS = num(m["replica-reads"])
		r.ReplicaReadPeakQPS = num(m["replica-read-peak"])
		for _, w := range strings.Split(m["writes"], ",") {
			if loc, q, ok := strings.Cut(w, ":"); ok {
				if r.Writes == nil {
					r.Writes = map[string]float64{}
				}
				r.Writes[loc] = num(q)
			}
		}
		if v, ok := m["split"]; ok {
			r.SplitAt = time.Unix(int64(num(v)), 0)
		}
		if _, ok := m["busy"]; ok {
			s.Busy[id] = true
		}
		_, r.LoadStale = m["stale"]
		_, r.ReplicaReadsUnknown = m["replica-reads-unknown"]
		_, r.ControlLoop = m["control"]
		r.RF = int(num(m["rf"]))
		s.Ranges = append(s.Ranges, r)
	case "recent":
		m := kv(f[2:])
		op := Operator{Range: id, Source: uint64(num(m["from"])), Target: uint64(num(m["to"]))}
		for k := OpAddVoter; k <= OpMerge; k++ {
			if k.String() == m["kind"] {
				op.Kind = k
			}
		}
		if op.Kind.String() != m["kind"] {
			t.Fatalf("%q: bad kind", line)
		}
		s.Recent = append(s.Recent, RecentOp{Op: op, At: time.Unix(int64(num(m["at"])), 0)})
	default:
		t.Fatalf("unknown line %q", line)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.RangeMaxBytes = c.RangeMinBytes
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "oscillate") {
		t.Fatalf("range-max < 2·range-min accepted: %v", err)
	}
	for name, bad := range map[string]func(*Config){
		"negative range cooldown":   func(c *Config) { c.RangeCooldown = -time.Second },
		"negative node cooldown":    func(c *Config) { c.NodeCooldown = -time.Second },
		"negative move margin":      func(c *Config) { c.MoveMargin = -0.1 },
		"negative min move qps":     func(c *Config) { c.MinMoveQPS = -1 },
		"negative load split slack": func(c *Config) { c.LoadSplitSlack = -0.5 },
		"negative load split min":   func(c *Config) { c.LoadSplitMinQPS = -1 },
		"split fill at one half":    func(c *Config) { c.SplitFill = 0.5 },
		"split fill above one":      func(c *Config) { c.SplitFill = 1.1 },
	} {
		c := DefaultConfig()
		bad(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
