package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
//	         [writes-from=(LOC:SHARE,…)]
//	config KEY=VALUE…          simulator options (tick, decide-every,
//	                           snapshots-per-node, max-in-flight,
//	                           ops-per-minute, bandwidth,
//	                           snapshot-overhead, merge-duration, dead-after,
//	                           thrash-window, follower-write-cost) or policy
//	                           configuration overrides (see ApplyOverrides)
//	add-node [locality=L] [capacity=QPS] [disk=RATE]
//	kill-node N | restart-node N | decommission N
//	skew-clock N | heal-clock N  the node's clock is (no longer) untrusted
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
//	autoscale [node-capacity=QPS]
//	                           run the elasticity controller with the
//	                           server's default policy (scaling off): the
//	                           capacity model weighs lease balance and the
//	                           bandwidth controller sets the migration rate
//	capacity                   what the capacity model measured, by node
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
	case "kill-node", "restart-node", "decommission", "skew-clock", "heal-clock":
		return "", in.nodeCmd(cmd, args)
	case "grow-data":
		return "", in.growData(args)
	case "transfer-lease":
		return "", in.transferLease(args)
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
	case "autoscale":
		return "", in.autoscale(args)
	case "capacity":
		return in.sim.formatCapacity(), nil
	}
	return "", fmt.Errorf("unknown command %q", cmd)
}

// nodeCmd runs kill-node, restart-node, decommission, skew-clock or
// heal-clock on the node args name.
func (in *Interpreter) nodeCmd(cmd string, args []Arg) error {
	if len(args) != 1 || len(args[0].Vals) != 0 {
		return fmt.Errorf("%s takes a node ID", cmd)
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(args[0].Key, "n"), 10, 64)
	if err != nil {
		return fmt.Errorf("%s: bad node %q", cmd, args[0].Key)
	}
	switch cmd {
	case "kill-node":
		err = in.sim.KillNode(id)
	case "restart-node":
		err = in.sim.RestartNode(id)
	case "skew-clock", "heal-clock":
		err = in.sim.SkewClock(id, cmd == "skew-clock")
	default:
		err = in.sim.Decommission(id)
	}
	return err
}

// growData runs grow-data: bytes=SIZE [range=R].
func (in *Interpreter) growData(args []Arg) error {
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
			return err
		}
	}
	return in.sim.GrowData(size, rangeID)
}

// transferLease runs transfer-lease: range=R to=N.
func (in *Interpreter) transferLease(args []Arg) error {
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
			return fmt.Errorf("transfer-lease: %w", err)
		}
	}
	return in.sim.TransferLease(rangeID, to)
}

func val(a Arg) string {
	if len(a.Vals) == 0 {
		return ""
	}
	return a.Vals[0]
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
