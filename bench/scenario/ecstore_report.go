package scenario

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tidekv/tidekv/plot"
)

// ecsReport writes the steps' table and the targets' verdicts.
func ecsReport(out io.Writer, steps []ecsStep, pinned bool, nodeCPUs float64, step, calib time.Duration) {
	fmt.Fprintf(out, "## ecstore: admission under open-loop load\n\n")
	where := "the nodes and the generator share every CPU"
	if pinned {
		where = "the three nodes share CPU 1 (taskset), the generator has CPU 0"
	}
	if nodeCPUs > 0 {
		where += fmt.Sprintf("; each node runs in a cgroup of its own with a quota of %g CPU (--node-cpus)", nodeCPUs)
	}
	fmt.Fprintf(out, "%d `tidekv server` processes (replication factor 3, Pebble, `--max-inflight %d`); %s. "+
		"Each node is sent Zipf(%.1f) requests over the third of %d keys (%d B values) whose lease it holds: reads "+
		"(gRPC Get in ANY mode, Redis GET), writes (Put, SET) and a 50/50 mix. Protocols: grpc = raw unary calls that ignore admission; "+
		"client = the Go client (MaxAttempts 2, FailFastOnOverload: no retries, but its window of requests in flight per node, closed also by measured queueing: ReadDelayTarget 20 ms); "+
		"resp = the Redis protocol from a pool of clients; resp-pipe = the Redis protocol from an open-loop client that sends each request when due on %d connections per node, pipelined behind the unanswered ones (it shares resp's sustainable rate). Closed-loop peak = goodput with %d "+
		"workers per node for %v (a refused worker waits 5 ms; raw gRPC for grpc and client, RESP for resp); the sustainable rate (\"sust.\") is the highest open-loop rate, "+
		"trying from that peak down a fifth at a time, at which at most 1%% failed and served p99 from schedule was at most 50 ms; "+
		"each step offers a multiple of it open-loop for %v, no retries, %v timeout "+
		"(gRPC: one call per request on %d connections per node; RESP: a pool of %d connections per node, one request on each at a time, "+
		"requests due while all are busy queue in the generator). "+
		"p99 \"from send\" counts from the moment the request left the generator, \"from schedule\" from when it was due. "+
		"Node columns are the extreme over nodes of samples every 250 ms: the admitted share, the median queueing delay of an admission window "+
		"(gRPC requests, from header read to start), the scheduler's median run-queue latency, requests in flight, memory. "+
		"\"not live\" lists the states other than live the cluster status gave any node during the step (suspect: heartbeats late). "+
		"Mode count-only is `--admission-target 0`: the in-flight bound alone.\n\n",
		ecsNodes, ecsMaxInflight, where, ecsZipfS, ecsKeys, ecsValueSize, ecsRESPPipeConns, ecsWorkers, calib, step, ecsTimeout, ecsConnsPerNode, ecsRESPConns)
	fmt.Fprintf(out, "| mode | proto | workload | × sust. | sust./node/s | closed-loop peak/node/s | offered/node/s | served/s | goodput %% of sust. | refused | dropped | timeouts+errors | p99 served from send ms | p99 from schedule ms | p99 refusal ms | min admit share | peak window delay ms | peak sched latency ms | peak in flight | peak RSS MiB | peak heap MiB | peak goroutines | not live |\n")
	fmt.Fprintf(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, st := range steps {
		off := float64(st.offered)
		pct := func(n int64) string {
			if off == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f%%", 100*float64(n)/off)
		}
		served := float64(st.ok) / st.elapsed.Seconds()
		fmt.Fprintf(out, "| %s | %s | %s | %.1f | %s | %s | %s | %s | %.0f%% | %s | %s | %s | %s | %s | %s | %.2f | %s | %s | %d | %.0f | %.0f | %.0f | %s |\n",
			st.mode, st.proto, st.workload, st.multiple, lrThousands(st.peak), lrThousands(st.closedPeak), lrThousands(st.ratePerNode), lrThousands(served),
			100*served/(st.peak*ecsNodes), pct(st.rejected), pct(st.dropped), pct(st.timeouts+st.other),
			lrMs(lrQuantile(st.svc, 0.99)), lrMs(lrQuantile(st.lat, 0.99)), lrMs(lrQuantile(st.rej, 0.99)),
			st.minShare, lrMs(st.peakDelay), lrMs(st.peakSched), st.peakInflight, st.peakRSS/(1<<20), st.peakHeap/(1<<20), st.peakGoroutines, st.notLiveText())
	}
	fmt.Fprintf(out, "\nTargets at 1.5× and 3× the sustainable rate: served p99 from send ≤ %v, refusals' p99 ≤ %v, goodput ≥ %.0f%% of the sustainable rate, no node other than live.\n\n",
		ecsP99Target, ecsRefusalTarget, 100*ecsGoodputTarget)
	fmt.Fprintf(out, "| mode | proto | workload | × sust. | served p99 | refusal p99 | goodput | not live | verdict |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, st := range steps {
		if st.multiple < 1.5 {
			continue
		}
		p99, rej := lrQuantile(st.svc, 0.99), lrQuantile(st.rej, 0.99)
		good := float64(st.ok) / st.elapsed.Seconds() / (st.peak * ecsNodes)
		verdict := "met"
		if p99 > ecsP99Target || rej > ecsRefusalTarget || good < ecsGoodputTarget || len(st.notLive) > 0 {
			verdict = "missed"
		}
		fmt.Fprintf(out, "| %s | %s | %s | %.1f | %s ms | %s ms | %.0f%% | %s | %s |\n", st.mode, st.proto, st.workload, st.multiple,
			lrMs(p99), lrMs(rej), 100*good, st.notLiveText(), verdict)
	}
	for _, st := range steps {
		if st.firstErr != "" {
			fmt.Fprintf(out, "\nFirst error other than a refusal or timeout, %s %s %s at %.1f×: %s\n", st.mode, st.proto, st.workload, st.multiple, st.firstErr)
		}
	}
	fmt.Fprintln(out)
}

// notLiveText lists the states other than live seen in the step, "-" for
// none.
func (st ecsStep) notLiveText() string {
	if len(st.notLive) == 0 {
		return "-"
	}
	return strings.Join(slices.Sorted(maps.Keys(st.notLive)), ", ")
}

// ecstoreChart is ecStore's figure for one protocol: the failed share
// and the p99 of served requests against the offered multiple of the
// peak, a line per workload and mode.
func ecstoreChart(steps []ecsStep, proto string) plot.Chart {
	failed, p99 := plot.Panel{YLabel: "failed % of offered"}, plot.Panel{YLabel: "p99 served ms (from send)"}
	var names []string
	idx := map[string]int{}
	for _, st := range steps {
		if st.proto != proto {
			continue
		}
		name := st.workload + " (" + st.mode + ")"
		i, ok := idx[name]
		if !ok {
			i = len(names)
			idx[name] = i
			names = append(names, name)
			failed.Series = append(failed.Series, plot.Series{Name: name})
			p99.Series = append(p99.Series, plot.Series{Name: name})
		}
		failed.Series[i].Points = append(failed.Series[i].Points, plot.Point{X: st.multiple, Y: share(float64(st.failed()), float64(st.offered))})
		p99.Series[i].Points = append(p99.Series[i].Points, plot.Point{X: st.multiple, Y: ms(lrQuantile(st.svc, 0.99))})
	}
	return plot.Chart{Title: "ecstore (" + proto + "): failed requests and p99 against the offered load", XLabel: "offered load, multiple of the sustainable rate",
		Panels: []plot.Panel{failed, p99}}
}
