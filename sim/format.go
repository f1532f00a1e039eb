package sim

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/units"
)

// FormatNodes prints a step's node table.
func FormatNodes(st Step) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "node\tloc\tstate\tphase\treplicas\tleases\tbytes\tqps\tcpu")
	for _, n := range st.Nodes {
		loc := n.Locality
		if loc == "" {
			loc = "-"
		}
		state := n.State.String()
		if n.Gone {
			fmt.Fprintf(tw, "n%d\t%s\tgone\t-\t-\t-\t-\t-\t-\n", n.ID, loc)
			continue
		}
		fmt.Fprintf(tw, "n%d\t%s\t%s\t%s\t%d\t%d\t%s\t%.0f\t%.2f\n", n.ID, loc, state, phaseShort(n.Phase),
			n.Replicas, n.Leases, units.Compact(n.Bytes), n.QPS, n.CPU)
	}
	tw.Flush()
	return b.String()
}

func phaseShort(p placement.Phase) string {
	switch p {
	case placement.PhaseOne:
		return "1"
	case placement.PhaseTwo:
		return "2"
	}
	return "-"
}

// FormatCounters prints counters on one line.
func FormatCounters(c Counters) string {
	return fmt.Sprintf("adds=%d learners=%d removes=%d moves=%d lease-transfers=%d splits=%d merges=%d moved=%s failed=%d throttled=%d policy-bugs=%d thrash=%d unsplits=%d",
		c.AddVoters, c.AddLearners, c.Removes, c.Moves, c.LeaseTransfers, c.Splits, c.Merges, units.Compact(c.BytesMoved),
		c.Failed, c.Throttled, c.PolicyBugs, c.Thrash(), c.Unsplits)
}

// FormatSummary prints a step: the node table, imbalance, health and the
// counters of the run that led to it (run) and since the start.
func FormatSummary(st Step, run Counters) string {
	var b strings.Builder
	fmt.Fprintf(&b, "t=%s ranges=%d in-flight=%d\n", fmtDur(st.At), st.Ranges, st.InFlight)
	b.WriteString(FormatNodes(st))
	im := st.Imbalance
	fmt.Fprintf(&b, "imbalance: replicas=%.2f leases=%.2f bytes=%.2f qps=%.2f\n", im.Replicas, im.Leases, im.Bytes, im.QPS)
	fmt.Fprintf(&b, "health: under-replicated=%d over-replicated=%d unavailable=%d\n", st.UnderReplicated, st.OverReplicated, st.Unavailable)
	fmt.Fprintf(&b, "run:   %s\n", FormatCounters(run))
	fmt.Fprintf(&b, "total: %s\n", FormatCounters(st.Total))
	return b.String()
}

// FormatLog prints log entries, at most limit of them (0: all).
func FormatLog(entries []LogEntry, limit int) string {
	var b strings.Builder
	for i, e := range entries {
		if limit > 0 && i == limit {
			fmt.Fprintf(&b, "  … %d more\n", len(entries)-limit)
			break
		}
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// FormatTimeline prints one line per interval of every from the steps
// after from: per-node replica counts (with a phase or state mark), the
// imbalance indices, and the operations completed in the interval.
func FormatTimeline(steps []Step, from time.Duration, every time.Duration, prev Counters) string {
	var b strings.Builder
	if every <= 0 || len(steps) == 0 {
		return ""
	}
	i := 0
	end := steps[len(steps)-1].At
	for t := from + every; ; t += every {
		if t > end {
			t = end
		}
		for i+1 < len(steps) && steps[i+1].At <= t {
			i++
		}
		st := steps[i]
		if st.At > t || st.At <= from {
			if t >= end {
				break
			}
			continue
		}
		var nodes []string
		for _, n := range st.Nodes {
			if n.Gone {
				continue
			}
			mark := ""
			switch {
			case n.State != placement.NodeLive:
				mark = "(" + n.State.String() + ")"
			case n.Phase != placement.PhaseNone:
				mark = "(p" + phaseShort(n.Phase) + ")"
			}
			nodes = append(nodes, fmt.Sprintf("%d%s", n.Replicas, mark))
		}
		d := st.Total.Sub(prev)
		prev = st.Total
		fmt.Fprintf(&b, "%-6s replicas=[%s] idx=%.2f/%.2f/%.2f ranges=%d under=%d | changes=%d leases=%d splits=%d merges=%d\n",
			fmtDur(st.At), strings.Join(nodes, " "), st.Imbalance.Replicas, st.Imbalance.Bytes, st.Imbalance.QPS,
			st.Ranges, st.UnderReplicated, d.ReplicaChanges(), d.LeaseTransfers, d.Splits, d.Merges)
		if t >= end {
			break
		}
	}
	return b.String()
}
