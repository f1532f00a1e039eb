package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/units"
)

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
		case "writes-from":
			w.WriteOrigins, err = originShares(a.Vals)
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
		case "requests-only":
			o.RequestsOnly, err = strconv.ParseBool(v)
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

// originShares parses writes-from=(LOC:SHARE, …); writes-from=() clears it.
func originShares(vals []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, v := range vals {
		loc, f, ok := strings.Cut(v, ":")
		if !ok {
			return nil, fmt.Errorf("writes-from wants LOC:SHARE, got %q", v)
		}
		x, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, err
		}
		out[loc] = x
	}
	return out, nil
}
