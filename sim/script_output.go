package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/units"
)

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
